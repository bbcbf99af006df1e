"""What the agent-session use case needs from storage; `cairn.dynamodb.agent_session_table` implements it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoints.models import Admission, Owner


@dataclass(frozen=True)
class ItemPage:
    """Items in the order they were added; `next` is the sequence to read before when older ones remain;
    `version` the session's when read (0: no session), which every change moves on."""

    items: list[str]
    next: int | None
    version: int = 0


@dataclass(frozen=True)
class Replaced:
    """A session after a replacement: how many items it holds and its version."""

    count: int
    version: int


@dataclass(frozen=True)
class Popped:
    """What a pop took (None: nothing), and whether a commit checked the token on the way."""

    text: str | None
    token_checked: bool


@dataclass(frozen=True)
class AddPart:
    """Where a part of an add sent over several requests (under one `add_id`) lies: `offset`, how many of the
    add's items the parts before it hold; `more`, whether parts follow it."""

    offset: int
    more: bool


class SessionItemStore(Protocol):
    def add(
        self,
        admission: Admission,
        session_id: str,
        items: Sequence[str],
        *,
        add_id: str | None,
        now: float,
        max_bytes: int,
        part: AddPart | None = None,
    ) -> int:
        """Append the items (canonical JSON texts) in order, all in one commit; the session's count after it.

        `Unauthorized` unless the admission's token opens the live address. `StorageLimitExceeded`, and
        nothing changed, when the address would then store more than `max_bytes` (its files and sessions).

        The first add creates the session; two first adds at once still make one.
        An add whose `add_id` was committed before adds nothing and answers the count now.

        `part` (with an `add_id`): these items are a part of a larger add; no reader sees any of its parts
        until its last one commits them all at once. A part written before writes nothing when sent again.
        """
        ...

    def page(self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int) -> ItemPage:
        """The newest `limit` items below sequence `before` (None: the newest of all), within `max_bytes`."""
        ...

    def pop(self, admission: Admission, session_id: str, *, pop_id: str | None, now: float) -> Popped:
        """Remove and return the newest item, conditional on the session's head: no two callers get one item.

        A pop under a `pop_id` that committed before takes nothing and answers the item it took then.
        `Unauthorized` when the commit's address check refuses the token. With no commit (nothing to
        pop, or the earlier pop's item found without one) the token is not checked yet: the caller checks it.
        """
        ...

    def replace(
        self,
        admission: Admission,
        session_id: str,
        items: Sequence[str],
        *,
        newest: int | None,
        version: int | None,
        replace_id: str | None,
        now: float,
        max_bytes: int,
    ) -> Replaced:
        """Put the items in place of the session's newest `newest` items (None: every item), in one commit
        that readers see whole (a replacement of every item by more than it holds writes them before it).

        `SessionConflict` (`moved`) when `version` is given and the session is no longer at it, (`held`) when
        another replacement of every item is being written; `InvalidRequest` when the items replaced, while
        older ones stay, do not fit in one commit with the new ones. Otherwise as `add` (the token, the
        storage limit, and `replace_id` as `add_id`).
        """
        ...

    def clear(self, owner: Owner, session_id: str, *, now: float) -> None:
        """Empty the session in one commit; the items it held are removed after."""
        ...


# -- Strands sessions ------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """What a write to an agent or multi-agent asserts: the version its run last saw, and the run.

    `writer` None (a multi-agent) conditions on the version alone; otherwise the write also needs that no
    other writer holds the record, and holds it itself until `held_until` (epoch seconds).
    """

    version: int
    writer: str | None = None
    held_until: float = 0.0


@dataclass(frozen=True)
class StoredRecord:
    """An agent's or multi-agent's stored JSON text, its version, and (agents) how many messages it has."""

    text: str
    version: int
    messages: int


@dataclass(frozen=True)
class MessagePage:
    """Message texts from an offset on, in index order; `next` is the offset to go on from when more remain."""

    messages: list[str]
    next: int | None


class StrandsSessionStore(Protocol):
    """Strands' session repository in an address's partition; `kind` is `A` (agent) or `X` (multi-agent).

    Every write that names a `Claim` commits only while the record is at its version and, for a claim with a
    writer, no other writer's hold is live; it moves the version on. A refusal is `SessionConflict` (`moved`,
    `held`, `exists`) and stores nothing; so is `StorageLimitExceeded`, for a write that would take the
    address past the bytes it may store (its files and sessions).
    """

    def create_session(self, owner: Owner, session_id: str, text: str, *, now: float) -> None: ...

    def read_session(self, address_id: str, session_id: str) -> str | None: ...

    def create_record(self, owner: Owner, session_id: str, kind: str, record_id: str, text: str, *, now: float) -> None:
        """Store a new record at version 1 with no messages; `exists` when it is there already."""
        ...

    def read_record(self, address_id: str, session_id: str, kind: str, record_id: str) -> StoredRecord | None: ...

    def update_record(
        self, owner: Owner, session_id: str, kind: str, record_id: str, text: str, claim: Claim, *, now: float
    ) -> int:
        """Replace the record's text; its new version."""
        ...

    def create_message(
        self, owner: Owner, session_id: str, agent_id: str, message_id: int, text: str, claim: Claim, *, now: float
    ) -> int:
        """Add message `message_id`, which must be the agent's next index; the agent's new version."""
        ...

    def update_message(
        self, owner: Owner, session_id: str, agent_id: str, message_id: int, text: str, claim: Claim, *, now: float
    ) -> int:
        """Replace a stored message; the agent's new version."""
        ...

    def messages(
        self, address_id: str, session_id: str, agent_id: str, *, offset: int, limit: int, max_bytes: int
    ) -> MessagePage: ...

    def release(self, owner: Owner, session_id: str, agent_id: str, writer: str, *, now: float) -> bool:
        """End `writer`'s hold on the agent; False when it held none."""
        ...
