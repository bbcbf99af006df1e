"""`SessionItemStore` on the single table: a session's head and items live in its address's partition.

Every change is one transaction: the address's head checked (live, this
token), the session's head put under the condition that it is still the
version read (absent, for the first add), and the items put or deleted. Of
two changes read from one version, one commits; the other reads the head
again and goes on from there, so no add is lost and no item popped twice.
A clear moves the head's `floor` to its last sequence, which hides every
item at or below it at once; they are deleted after the commit. A
replacement of every item does the same and puts the new items above; one
of the newest items puts the new ones above them too, and deletes the
replaced ones in its commit, or, when it cannot hold them, has the head hide
them (`Head.hides`) until they are deleted after the commit.

A change with more rows than one commit holds is staged: a replacement of
every item (the OpenAI Agents SDK's compaction keeps every user message), or
an add (a turn of many tool calls). Its rows are written a commit at a time
above the live items, where no read looks, under a stage the head records,
and one last commit makes them the session's items: as the floor moves under
them, for a replacement; after the live items, for an add. An add larger than
one request holds is staged across its requests, its parts', the last part
making it the session's. A writer that stops midway leaves its stage to
lapse; the next commit after that lets it go.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cairn import jsontext
from cairn.agent_sessions.ports import AddPart, ItemPage, Popped, Replaced
from cairn.checkpoints.models import Admission, Owner
from cairn.dynamodb import address_items, agent_session_items, blobs, checkpoint_items, keys, storage_usage, table_ops
from cairn.dynamodb.agent_session_items import Head
from cairn.dynamodb.items import get_int, key
from cairn.errors import IdempotencyKeyReused, InvalidRequest, SessionConflict, StorageLimitExceeded, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]
_T = TypeVar("_T")
logger = logging.getLogger(__name__)
_S = TypeVar("_S")

# Each lost race is another writer's commit, so attempts are progress; the bound only ends a pathological run.
_ATTEMPTS = 64
# What every change commits besides its own actions: the address's check, the head and the count of stored bytes.
_OWN_ACTIONS = 3
# How far above the live items a stage opens: more than adds could append while it is held, so theirs stay below.
STAGE_GAP = 1_000_000
# How long a stage is its writer's (seconds): far longer than one request writes; then any writer may drop it.
STAGE_LEASE = 300
# The sequence numbers keys can spell.
_SEQUENCES = 10**keys.SEQ_WIDTH


class _Moved(Exception):
    """The head is no longer the version read: read it again."""


class _Stale(Exception):
    """The head is not at the version a replacement expects."""

    def __init__(self, head: Head) -> None:
        super().__init__("stale")
        self.head = head


class _Oversized(Exception):
    """An add, or a replacement of every item, has more rows than one commit holds: it is staged, from `head`."""

    def __init__(self, head: Head) -> None:
        super().__init__("oversized")
        self.head = head


class _Claimed(Exception):
    """The change's claim is already stored: it committed before. `item`: the claim as stored."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("claimed before")
        self.item = item


@dataclass(frozen=True)
class Growth:
    """What a commit that may grow a session adds beyond its head's count (rows counted for good), and the
    address's limit."""

    rows: int
    max_bytes: int


@dataclass(frozen=True)
class _Staged:
    """A change too large for one commit, as asked for: a replacement of every item, or an add (`appending`).
    `change_id`: its client's id for it (`replace_id`, `add_id`)."""

    owner: Owner
    session_id: str
    items: Sequence[str]
    sizes: Sequence[int]
    version: int | None
    change_id: str | None
    digest: str
    appending: bool = False
    # For a part of an add sent over several requests: the add's items the parts before it hold (rows the stage
    # has already), and whether parts follow, whose rows the stage waits for before its last commit.
    offset: int = 0
    more: bool = False

    @property
    def through(self) -> int:
        """How many rows the stage holds once this part's are written."""
        return self.offset + len(self.items)


class AgentSessionTable:
    def __init__(self, client: DynamoDBClient, table: str, *, reclaim: storage_usage.Reclaim | None = None) -> None:
        """`reclaim`: what gives a full address room back (see `storage_usage.with_room`)."""
        self._client = client
        self._table = table
        self._reclaim = reclaim

    # -- writes --------------------------------------------------------------

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
        owner, head = self._owner_and_head(admission, session_id)
        sizes = [jsontext.sent_size(text) for text in items]
        if part is not None and add_id is not None:
            digest = agent_session_items.PARTED_ADD_DIGEST
            parted = _Staged(owner, session_id, items, sizes, None, add_id, digest, True, part.offset, part.more)
            return self._add_part(parted, head, now=now, max_bytes=max_bytes).count
        digest = agent_session_items.added_digest(items)
        claims = self._claims(owner, session_id, add_id, digest)
        size = sum(agent_session_items.item_bytes(each) for each in sizes)
        # The claim stays as long as the address: it counts for good.
        claimed_bytes = agent_session_items.ROW_OVERHEAD * len(claims)

        def attempt(head: Head) -> int:
            new = head.added(len(items), size)
            puts = self._item_puts(owner, session_id, head, items, sizes)
            if len(claims) + len(puts) + _OWN_ACTIONS > table_ops.MAX_TRANSACTION_ACTIONS:
                raise _Oversized(head)
            try:
                self._commit(
                    owner,
                    session_id,
                    (head, new),
                    [*claims, *puts],
                    now=now,
                    claimed=bool(claims),
                    growth=Growth(claimed_bytes, max_bytes),
                )
            except _Claimed as claimed:
                if not agent_session_items.same_claim(claimed.item, digest):
                    raise IdempotencyKeyReused(
                        "This add_id was sent before with other items: send these under an add_id of their own.",
                        field="add_id",
                    ) from None
                return head.count
            return new.count

        try:
            return self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)
        except _Oversized as oversized:
            staged = _Staged(
                owner, session_id, items, sizes, version=None, change_id=add_id, digest=digest, appending=True
            )
            new = self._write_staged(staged, oversized.head, now=now, max_bytes=max_bytes)
        if new.hidden_high:
            self._sweep_hidden(owner, session_id, new, now=now)
        return new.count

    def pop(self, admission: Admission, session_id: str, *, pop_id: str | None, now: float) -> Popped:
        def top() -> tuple[Head, Item | None]:
            head, live = self._newest_first(admission.address_id, session_id, before=None, wanted=1)
            return head, next(live, None)

        def attempt(seen: tuple[Head, Item | None]) -> Popped:
            head, newest = seen
            if newest is None:
                # No commit, so no address check: the caller checks the token. The session may be empty
                # because this very pop took its last item before its answer was lost.
                return Popped(self._popped_before(admission.address_id, session_id, pop_id), token_checked=False)
            text = self._text(newest)
            # The head carries its address's expiry; the commit's address check decides the token.
            owner = admission.unchecked_owner(head.expires_at)
            claims = (
                []
                if pop_id is None
                else agent_session_items.pop_claim_puts(self._table, owner, session_id, pop_id, text, now=now)
            )
            deletes = agent_session_items.item_deletes(self._table, newest)
            # A claim keeps the item a day for the pop's retries, and the head counts it until then.
            held_until = None if pop_id is None else int(now) + agent_session_items.POP_CLAIM_SECONDS
            new = head.popped(agent_session_items.counted_bytes(newest), held_until=held_until)
            try:
                self._commit(owner, session_id, (head, new), [*claims, *deletes], now=now, claimed=bool(claims))
            except _Claimed as claimed:
                earlier = (
                    self._text(claimed.item)
                    if claimed.item
                    else self._popped_before(admission.address_id, session_id, pop_id)
                )
                return Popped(earlier, token_checked=True)
            return Popped(text, token_checked=True)

        return self._until_committed(top(), top, attempt)

    def _popped_before(self, address_id: str, session_id: str, pop_id: str | None) -> str | None:
        """The item a pop under `pop_id` took, if it committed; None without an id."""
        if pop_id is None:
            return None
        item = self._row(address_id, keys.agent_session_pop_sk(session_id, pop_id))
        return None if item is None else self._text(item)

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
        """Put `items` in place of the session's newest `newest` items (None: all of them), in one commit (of
        every item by more rows than one commit holds, one commit after writing them: `_write_staged`).

        With `version`, only while the session is still at that version (`SessionConflict` otherwise):
        the items replaced are then exactly the newest ones its caller read. Replacing every item moves
        the floor, as a clear does, whatever their number; replacing some of them while keeping older ones
        deletes those in the commit or hides them by the head, whatever their number too, but the new items
        must fit in the commit (`InvalidRequest` when not).
        A retry under a `replace_id` that committed writes nothing and answers the head now.
        """
        owner, head = self._owner_and_head(admission, session_id)
        digest = agent_session_items.replaced_digest(items, newest, version)
        claims = self._claims(owner, session_id, replace_id, digest)
        sizes = [jsontext.sent_size(text) for text in items]
        size = sum(agent_session_items.item_bytes(each) for each in sizes)

        def attempt(head: Head) -> tuple[Head, bool]:
            if version is not None and head.visible_version != version:
                raise _Stale(head)
            removed = self._newest_rows(owner.address_id, session_id, head, newest)
            puts = [*claims, *self._item_puts(owner, session_id, head, items, sizes)]
            if len(puts) + _OWN_ACTIONS > table_ops.MAX_TRANSACTION_ACTIONS:
                if removed is None:
                    raise _Oversized(head)
                raise InvalidRequest(
                    "The items that take the newest ones' place while older ones stay take more than one "
                    "commit: send fewer or smaller ones, or replace every item.",
                    field="items",
                )
            if removed is None:
                new, actions, hiding = head.replaced(None, 0, len(items), size), puts, False
            else:
                new, actions, hiding = self._replacing_newest(head, removed, puts, len(items), size)
            if removed is not None and head.hidden_high:
                # Rows an earlier replacement hid and could not delete: gone before this head stops hiding them.
                self._delete_items(owner.address_id, session_id, head.hidden_low + 1, head.hidden_high)
            try:
                self._commit(
                    owner,
                    session_id,
                    (head, new),
                    actions,
                    now=now,
                    claimed=bool(claims),
                    growth=Growth(agent_session_items.ROW_OVERHEAD * len(claims), max_bytes),
                )
            except _Claimed as claimed:
                return self._replaced_before(claimed.item, digest, owner.address_id, session_id), True
            if hiding:
                self._sweep_hidden(owner, session_id, new, now=now)
            return new, removed is None

        try:
            try:
                new, swept = self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)
            except _Oversized as oversized:
                staged = _Staged(owner, session_id, items, sizes, version=version, change_id=replace_id, digest=digest)
                new, swept = self._write_staged(staged, oversized.head, now=now, max_bytes=max_bytes), True
        except _Stale as stale:
            claim = (
                None
                if replace_id is None
                else self._row(owner.address_id, keys.agent_session_add_sk(session_id, replace_id))
            )
            if claim is None:
                raise SessionConflict(
                    "The session changed since it was read: read it again.",
                    reason="moved",
                    current_version=stale.head.visible_version,
                ) from None
            new, swept = self._replaced_before(claim, digest, owner.address_id, session_id), True
        if swept:
            self._delete_through(owner.address_id, session_id, new.floor)
        return Replaced(new.count, new.visible_version)

    def _sweep_hidden(self, owner: Owner, session_id: str, hiding: Head, *, now: float) -> None:
        """Delete the rows the head `hiding` hides, then let the head forget them (a write no reader sees), unless
        another change already did. Best effort: the replacement is made; rows left are deleted by the next one."""

        def forget(seen: Head) -> None:
            if (seen.hidden_low, seen.hidden_high) == (hiding.hidden_low, hiding.hidden_high):
                self._commit(owner, session_id, (seen, seen.unhidden()), [], now=now)

        if not self._delete_unseen(owner.address_id, session_id, hiding.hidden_low + 1, hiding.hidden_high):
            return
        read = functools.partial(self._head, owner.address_id, session_id)
        try:
            self._until_committed(hiding, read, forget)
        except Exception:  # noqa: BLE001 - the replacement's own answer stands
            logger.warning("A session's head still hides rows already deleted", exc_info=True)

    def _replacing_newest(
        self, head: Head, removed: list[Item], puts: list[Item], items: int, size: int
    ) -> tuple[Head, list[Item], bool]:
        """The head and the actions putting `puts` (`items` of `size` counted bytes, claims first) in place of
        the newest rows `removed`: their deletes beside the puts when the commit holds them all, else the head
        hiding them, to be deleted after the commit (True)."""
        removed_bytes = sum(agent_session_items.counted_bytes(row) for row in removed)
        deletes = [each for row in removed for each in agent_session_items.item_deletes(self._table, row)]
        if len(puts) + len(deletes) + _OWN_ACTIONS <= table_ops.MAX_TRANSACTION_ACTIONS:
            return head.replaced(len(removed), removed_bytes, items, size), [*puts, *deletes], False
        oldest = min(get_int(row, "seq") for row in removed)
        return head.replaced(len(removed), removed_bytes, items, size, hiding_from=oldest), puts, True

    def _write_staged(self, staged: _Staged, head: Head, *, now: float, max_bytes: int) -> Head:
        """`staged`'s change, whose rows one commit cannot hold: a stage opened above the live items (on `head`,
        as last read), its rows written to it a commit at a time, then one commit making them the session's
        items, in place of every item or after them. Answers the head that commit left (for a retry of one made
        before, the head now).

        Its commits before the last change nothing a reader sees, so they leave the session's version as it was
        (`Head.quiet_writes`): with `version`, each needs the session still at it, and another writer's change
        ends the replacement (`_Stale`), while one that fails leaves the session at it for a retry. Without,
        adds may come in meanwhile, below the stage: the last commit of a replacement replaces them too, as a
        replacement of every item in one commit would, and an add's puts its items after them. Ended any other
        way than by its last commit, the stage is dropped (or, past dropping, left to lapse).
        """
        owner, session_id = staged.owner, staged.session_id
        stage_id = uuid.uuid4().hex
        read = functools.partial(self._head, owner.address_id, session_id)

        # Every way out but the last commit drops the stage, if it opened: an opening whose answer was lost
        # may have committed.
        try:
            head = self._opened_stage(staged, stage_id, head, now=now, max_bytes=max_bytes)
            while head.stage is not None:
                step = functools.partial(self._stage_step, staged, stage_id, now=now, max_bytes=max_bytes)
                head = self._until_committed(head, read, step)
        except _Claimed as claimed:
            self._drop_stage(owner, session_id, stage_id, now)
            field = "add_id" if staged.appending else "replace_id"
            return self._replaced_before(claimed.item, staged.digest, owner.address_id, session_id, field=field)
        except _Stale:
            self._drop_stage(owner, session_id, stage_id, now)
            raise _Stale(read()) from None  # the version now, past this replacement's own commits
        except Exception:
            self._drop_stage(owner, session_id, stage_id, now)
            raise
        return head

    def _add_part(self, staged: _Staged, head: Head, *, now: float, max_bytes: int) -> Head:
        """A part of an add sent over several requests under one `add_id` (`staged.offset`, `staged.more`): its
        rows written to the add's own stage, which its first part opens and each part holds on to, and after its
        last part's rows, the commit making every part's rows the session's newest items at once. Answers the
        head as left.

        A part sent again once written writes nothing, and any part sent again once the last committed answers
        the head now. Until the last part, the add holds the session's other changes too large for one commit
        off (`held`), and a sender that stops leaves the stage to lapse, with nothing a reader sees. A part
        whose stage is gone (it lapsed, and another change let it go) is refused: the add starts again.
        """
        owner, session_id = staged.owner, staged.session_id
        assert staged.change_id is not None
        stage_id = f"add:{staged.change_id}"
        read = functools.partial(self._head, owner.address_id, session_id)
        try:
            head = self._into_parts_stage(staged, stage_id, head, now=now, max_bytes=max_bytes)
            step = functools.partial(self._stage_step, staged, stage_id, now=now, max_bytes=max_bytes)
            while head.stage is not None and not (staged.more and head.stage.written >= staged.through):
                head = self._until_committed(head, read, step)
        except _Claimed as claimed:
            return self._replaced_before(claimed.item, staged.digest, owner.address_id, session_id, field="add_id")
        except StorageLimitExceeded:
            # The add cannot end: its stage goes now rather than hold the session's large changes off.
            self._drop_stage(owner, session_id, stage_id, now)
            raise
        if not staged.more and head.hidden_high:
            self._sweep_hidden(owner, session_id, head, now=now)
        return head

    def _into_parts_stage(self, staged: _Staged, stage_id: str, head: Head, *, now: float, max_bytes: int) -> Head:
        """The head with the add's stage open, as far as this part finds it: opened for its first part, or left
        as an earlier part (or this one, sent before) left it. `_Claimed` when the add committed already."""
        owner, session_id = staged.owner, staged.session_id
        stage = head.lapsed(now).stage
        if stage is not None and stage.stage_id == stage_id:
            if stage.written < staged.offset:
                raise InvalidRequest(
                    f"This add's parts so far hold {stage.written} items; send the part that follows them.",
                    field="offset",
                )
            return head
        if staged.offset:
            claim = self._row(owner.address_id, keys.agent_session_add_sk(session_id, staged.change_id or ""))
            if claim is not None:  # a part sent again after the last committed
                raise _Claimed(claim)
            raise SessionConflict(
                "This add's earlier parts were let go before this one came (their hold lapsed): send the add "
                "again from its first part, under a new add_id.",
                reason="parts_lost",
            )
        return self._opened_stage(staged, stage_id, head, now=now, max_bytes=max_bytes)

    def _opened_stage(self, staged: _Staged, stage_id: str, head: Head, *, now: float, max_bytes: int) -> Head:
        """The head once the stage `stage_id` opened on it (read again while other writers move it), and the
        rows of a lapsed stage the opening let go of deleted."""
        owner, session_id = staged.owner, staged.session_id
        read = functools.partial(self._head, owner.address_id, session_id)
        opened = functools.partial(self._open_stage, staged, stage_id, now=now, max_bytes=max_bytes)
        seen, head = self._until_committed(head, read, opened)
        if seen.stage is not None:  # a lapsed stage, let go of by the opening
            self._delete_stage_rows(owner.address_id, session_id, seen.stage)
        return head

    def _open_stage(
        self, staged: _Staged, stage_id: str, seen: Head, *, now: float, max_bytes: int
    ) -> tuple[Head, Head]:
        """The commit opening the stage `stage_id` on the head `seen`: the head read and the head committed.
        (On a session with no head yet, it makes the head, which counts.)"""
        if staged.version is not None and seen.visible_version != staged.version:
            raise _Stale(seen)
        held = seen.lapsed(now).stage
        if held is not None:
            raise SessionConflict(
                "Another change of this session, too large for one commit, is under way: send this one again once "
                "it ends.",
                reason="held",
                held_until=held.until,
            )
        # Above a lapsed stage's rows too, which are deleted after the commit.
        base = max(seen.last_seq, seen.stage.last if seen.stage else 0) + STAGE_GAP
        if base + len(staged.items) >= _SEQUENCES:
            raise InvalidRequest(
                "This session has used up its sequence numbers: continue in a new session.", field="items"
            )
        new = seen.staging(stage_id, base, int(now) + STAGE_LEASE)
        checks = self._claim_checks(staged)
        growth = Growth(0, max_bytes)
        self._commit(staged.owner, staged.session_id, (seen, new), checks, now=now, claimed=bool(checks), growth=growth)
        return seen, new

    def _stage_step(self, staged: _Staged, stage_id: str, seen: Head, *, now: float, max_bytes: int) -> Head:
        """The next commit of the stage `stage_id` on the head `seen`: more of its rows, or, once it holds every
        one, the flip making them the session."""
        stage = seen.stage
        if stage is None or stage.stage_id != stage_id:
            raise Unavailable("The replacement was let go before it ended: send it again.")
        if staged.version is not None and seen.visible_version != staged.version:
            raise _Stale(seen)
        owner, session_id = staged.owner, staged.session_id
        if stage.written == staged.through:
            if staged.appending and seen.hidden_high:
                # Rows an earlier replacement hid and could not delete: gone before this head stops hiding them.
                self._delete_items(owner.address_id, session_id, seen.hidden_low + 1, seen.hidden_high)
            new = seen.appended() if staged.appending else seen.flipped()
            claims = self._claims(owner, session_id, staged.change_id, staged.digest)
            growth = Growth(agent_session_items.ROW_OVERHEAD * len(claims), max_bytes)
            self._commit(owner, session_id, (seen, new), claims, now=now, claimed=bool(claims), growth=growth)
            return new
        puts, count, size = self._stage_part(staged, stage)
        # The parts of an add that come over several requests keep their stage for as long as they keep coming.
        new = seen.staged(count, size, until=int(now) + STAGE_LEASE if staged.offset or staged.more else None)
        self._commit(owner, session_id, (seen, new), puts, now=now, growth=Growth(0, max_bytes))
        return new

    def _stage_part(self, staged: _Staged, stage: agent_session_items.Stage) -> tuple[list[Item], int, int]:
        """The puts of the next items the stage lacks, as many as one commit holds: the puts, how many items
        they hold, and what those count."""
        puts: list[Item] = []
        count = size = 0
        room = table_ops.MAX_TRANSACTION_ACTIONS - _OWN_ACTIONS
        for index in range(stage.written - staged.offset, len(staged.items)):
            sent = staged.sizes[index]
            item = agent_session_items.item_puts(
                self._table, staged.owner, staged.session_id, stage.last + count + 1, staged.items[index], sent
            )
            if len(puts) + len(item) > room:
                break
            puts += item
            count += 1
            size += agent_session_items.item_bytes(sent)
        return puts, count, size

    def _claim_checks(self, staged: _Staged) -> list[Item]:
        """For a change its client named: the check that it has not committed yet."""
        if staged.change_id is None:
            return []
        address_id = staged.owner.address_id
        return [agent_session_items.no_claim(self._table, address_id, staged.session_id, staged.change_id)]

    def _drop_stage(self, owner: Owner, session_id: str, stage_id: str, now: float) -> None:
        """Let go of the stage `stage_id` if it is still open, and delete its rows; on failure it lapses instead."""
        read = functools.partial(self._head, owner.address_id, session_id)

        def dropped(seen: Head) -> agent_session_items.Stage | None:
            if seen.stage is None or seen.stage.stage_id != stage_id:
                return None
            self._commit(owner, session_id, (seen, seen.unstaged()), [], now=now)
            return seen.stage

        try:
            stage = self._until_committed(read(), read, dropped)
        except Exception:  # noqa: BLE001 - the replacement's own failure is the one to answer
            logger.warning("A session's stage was left to lapse", exc_info=True)
            return
        if stage is not None:
            self._delete_stage_rows(owner.address_id, session_id, stage)

    def _newest_rows(self, address_id: str, session_id: str, head: Head, newest: int | None) -> list[Item] | None:
        """The stored rows of the session's newest `newest` items as of `head`; None when that is every item."""
        if newest is None or newest >= head.count:
            return None
        current, live = self._newest_first(address_id, session_id, before=None, wanted=newest)
        rows = list(itertools.islice(live, newest))
        if current.version != head.version or any(get_int(row, "seq") > head.last_seq for row in rows):
            # Another change came in since `head` was read (a query may meet part of a transaction): its rows
            # are not the ones to replace, and its items may sit where the new ones would go.
            raise _Moved()
        return rows

    def _replaced_before(
        self, claim: Item | None, digest: str, address_id: str, session_id: str, *, field: str = "replace_id"
    ) -> Head:
        """The head now, for a retry of a change that committed under its id (found as `claim`), sent as `field`."""
        if not agent_session_items.same_claim(claim, digest):
            raise IdempotencyKeyReused(
                f"This {field} was sent before with another change: send this one under an id of its own.",
                field=field,
            )
        return self._head(address_id, session_id)

    def clear(self, owner: Owner, session_id: str, *, now: float) -> None:
        def attempt(head: Head) -> Head | None:
            if head.count == 0 and head.floor == head.last_seq:
                return None
            new = head.cleared()
            self._commit(owner, session_id, (head, new), [], now=now)
            return new

        head = self._head(owner.address_id, session_id)
        cleared = self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)
        if cleared is not None:
            self._delete_through(owner.address_id, session_id, cleared.floor)

    def _delete_through(self, address_id: str, session_id: str, floor: int) -> None:
        """Remove the items (and their pieces) a clear hid: every sequence up to `floor`."""
        self._delete_items(address_id, session_id, 0, floor)

    def _delete_stage_rows(self, address_id: str, session_id: str, stage: agent_session_items.Stage) -> None:
        """Remove the rows of a stage no head records any more, after the commit that let it go. Rows left over
        lie above the live items, where reads pass them by, until a later replacement's floor moves past them
        or a later large add's commit hides them (`Head.appended`) and deletes them."""
        self._delete_unseen(address_id, session_id, stage.base + 1, stage.last)

    def _delete_unseen(self, address_id: str, session_id: str, lowest: int, highest: int) -> bool:
        """Remove rows no read sees any more, after the commit that hid them, which is answered as made whatever
        happens here: rows it leaves are passed by, and a later change deletes them. True once all are gone."""
        try:
            self._delete_items(address_id, session_id, lowest, highest)
        except Exception:  # noqa: BLE001 - see above
            logger.warning("Rows of a session were left to delete later", exc_info=True)
            return False
        return True

    def _delete_items(self, address_id: str, session_id: str, lowest: int, highest: int) -> None:
        """Remove the rows of sequences `lowest .. highest` and their pieces."""
        pk = keys.address_pk(address_id)
        first, last = keys.agent_session_item_sk(session_id, lowest), keys.agent_session_item_sk(session_id, highest)
        for lower, upper in (
            (first, last),
            (keys.payload_chunk_prefix(first), keys.upper_bound(keys.payload_chunk_prefix(last))),
        ):
            table_ops.delete_partition(
                self._client,
                self._table,
                pk,
                lower,
                upper,
                exhausted=lambda: Unavailable("Clearing is throttled; retry shortly."),
            )

    def _claims(self, owner: Owner, session_id: str, client_id: str | None, digest: str) -> list[Item]:
        """The claim of a change its client named (`add_id`, `replace_id`), or none."""
        if client_id is None:
            return []
        return [agent_session_items.add_claim(self._table, owner, session_id, client_id, digest)]

    def _item_puts(
        self, owner: Owner, session_id: str, head: Head, items: Sequence[str], sizes: Sequence[int]
    ) -> list[Item]:
        """The puts of `items` (and their pieces), numbered right after the head's last sequence."""
        first = head.last_seq + 1
        return [
            put
            for offset, (text, sent) in enumerate(zip(items, sizes, strict=True))
            for put in agent_session_items.item_puts(self._table, owner, session_id, first + offset, text, sent)
        ]

    def _until_committed(self, first: _S, read: Callable[[], _S], attempt: Callable[[_S], _T]) -> _T:
        """`attempt` on what was read, and on a fresh `read` each time another writer moved the head first."""
        seen = first
        for tries in range(_ATTEMPTS):
            try:
                return attempt(seen)
            except _Moved:
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2**tries)))
                seen = read()
        raise Unavailable("The session is too busy right now; retry shortly.")

    def _commit(
        self,
        owner: Owner,
        session_id: str,
        move: tuple[Head, Head],
        actions: list[Item],
        *,
        now: float,
        claimed: bool = False,
        growth: Growth | None = None,
    ) -> None:
        """Commit `actions` with the address check, the head's move from what was read to its new state, and
        the address's count of stored bytes moved by what the session's rows count more or less.

        `claimed`: the first action is an add's or a pop's claim, whose failed condition is `_Claimed`.
        `growth`: for a commit that may grow the session, what it adds beyond the head's count and the limit
        the address's count must stay within (`StorageLimitExceeded` when it would not); without it, a
        commit only shrinks.
        """
        seen, new = move
        lapsed = new.lapsed_stage(now)
        new = new.lapsed(now)
        grown = new.counted(session_id) - seen.counted(session_id) + (growth.rows if growth else 0)
        head = agent_session_items.head_put(self._table, owner, session_id, seen, new)
        meter = None
        if grown < 0:
            meter = storage_usage.release(self._table, owner.address_id, -grown)
        elif growth is not None:
            # A pop or a clear never grows (a pop's claim holds what its item gave back): only these are charged.
            expiry = checkpoint_items.expiry(owner)
            meter = storage_usage.charge(
                self._table, owner.address_id, grown, max_bytes=growth.max_bytes, expiry=expiry
            )
        counted = [meter] if meter else []

        def transact() -> None:
            try:
                table_ops.transact_owned(
                    self._client,
                    checkpoint_items.address_check(self._table, owner, now=now),
                    [head, *actions, *counted],
                )
            except table_ops.Cancelled as cancelled:
                reason = cancelled.failed(1) if claimed else None
                if reason is not None:
                    raise _Claimed(reason.get("Item")) from cancelled
                refused = cancelled.failed(1 + len(actions)) if counted else None
                if growth is not None and grown > 0 and refused is not None and cancelled.failed(0) is None:
                    raise storage_usage.refusal(refused, grown, max_bytes=growth.max_bytes) from cancelled
                # The head moved, an item another pop took, or another transaction held one: read again.
                raise _Moved() from cancelled

        storage_usage.with_room(self._reclaim if growth and grown > 0 else None, owner, now, transact)
        if lapsed is not None:
            self._delete_stage_rows(owner.address_id, session_id, lapsed)

    # -- reads ---------------------------------------------------------------

    def page(self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int) -> ItemPage:
        for _ in range(_ATTEMPTS):
            head, page = self._page_as_of_head(address_id, session_id, limit=limit, before=before, max_bytes=max_bytes)
            # While a replacement is staged, the items are read by a query of their own after the head: its last
            # commit may come in between, and the rows it hides start to go. The page stands if the session did
            # not change meanwhile; else it is read again, most often from the replacement's items.
            if head.stage is None or self._head(address_id, session_id).visible_version == head.visible_version:
                return page
        raise Unavailable("The session is too busy right now; retry shortly.")

    def _page_as_of_head(
        self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int
    ) -> tuple[Head, ItemPage]:
        newest_first: list[str] = []
        budget = max_bytes
        oldest = None
        # One item beyond the page tells whether another page follows.
        head, live = self._newest_first(address_id, session_id, before=before, wanted=limit + 1)
        for item in live:
            size = agent_session_items.size_of(item)
            if len(newest_first) == limit or (newest_first and size > budget):
                return head, ItemPage(list(reversed(newest_first)), oldest, head.visible_version)
            newest_first.append(self._text(item))
            budget -= size
            oldest = int(item["seq"]["N"])
        return head, ItemPage(list(reversed(newest_first)), None, head.visible_version)

    def _owner_and_head(self, admission: Admission, session_id: str) -> tuple[Owner, Head]:
        """The owner the admission acts for (`Unauthorized` if none) and the session's head, in one read."""
        pk = keys.address_pk(admission.address_id)
        head_sk = keys.agent_session_head_sk(session_id)
        found = {
            item["sk"]["S"]: item
            for item in table_ops.batch_get(
                self._client,
                self._table,
                [key(pk, keys.META), key(pk, head_sk)],
                exhausted=lambda: Unavailable("The session is too busy right now; retry shortly."),
            )
        }
        address = found.get(keys.META)
        owner = admission.owner(address_items.record_from_item(address) if address else None)
        return owner, agent_session_items.head_from(found.get(head_sk))

    def _head(self, address_id: str, session_id: str) -> Head:
        return agent_session_items.head_from(self._row(address_id, keys.agent_session_head_sk(session_id)))

    def _row(self, address_id: str, sk: str) -> Item | None:
        """One row of the address's partition, read consistently."""
        found: Item | None = self._client.get_item(
            TableName=self._table, Key=key(keys.address_pk(address_id), sk), ConsistentRead=True
        ).get("Item")
        return found

    def _newest_first(
        self, address_id: str, session_id: str, *, before: int | None, wanted: int
    ) -> tuple[Head, Iterator[Item]]:
        """The session's head, and its live items below sequence `before`, newest first, `wanted` a query.

        With no `before`, one query reads both: the head sorts right above the items. Items a clear hid
        (at or below the head's `floor`) end the list, and items a replacement hid are passed by; they are
        only waiting to be deleted.
        """
        pk = keys.address_pk(address_id)
        lowest = keys.agent_session_item_sk(session_id, 1)
        if before is None:
            head_sk = keys.agent_session_head_sk(session_id)
            rows = table_ops.query_range(
                self._client, self._table, pk, lowest, head_sk, ScanIndexForward=False, page_size=wanted + 1
            )
            first = next(rows, None)
            if first is None or first["sk"]["S"] != head_sk:
                return Head(), iter(())
            head = agent_session_items.head_from(first)
            newest = next(rows, None)
            if newest is None or get_int(newest, "seq") <= head.last_seq:
                rows = itertools.chain([newest] if newest else [], rows)
            else:
                # A stage's rows sit between the head and the live items: read from below them.
                rows = self._items_through(pk, session_id, head.last_seq, wanted)
        else:
            head = self._head(address_id, session_id)
            if before <= head.floor + 1:
                return head, iter(())
            rows = self._items_through(pk, session_id, min(before - 1, head.last_seq), wanted)
        if head.count == 0:
            return head, iter(())
        live = itertools.takewhile(lambda item: get_int(item, "seq") > head.floor, rows)
        return head, (item for item in live if not head.hides(get_int(item, "seq")))

    def _items_through(self, pk: str, session_id: str, highest: int, wanted: int) -> Iterator[Item]:
        """The rows of sequences up to `highest`, newest first, `wanted` a query."""
        lowest, upper = keys.agent_session_item_sk(session_id, 1), keys.agent_session_item_sk(session_id, highest)
        return table_ops.query_range(
            self._client, self._table, pk, lowest, upper, ScanIndexForward=False, page_size=wanted
        )

    def _text(self, item: Item) -> str:
        data = blobs.read(self._client, self._table, item, legacy_prefix=keys.payload_chunk_prefix(item["sk"]["S"]))
        return (data or b"").decode("utf-8")
