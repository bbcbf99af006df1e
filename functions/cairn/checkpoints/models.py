"""What the checkpoint use case stores and answers, in its own terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cairn import credentials
from cairn.addresses.access import admit, require_well_formed
from cairn.addresses.models import AddressRecord
from cairn.addresses.ports import AddressStore


@dataclass(frozen=True)
class Blob:
    """A value as the saver's serializer made it: its type tag and its bytes.

    Small values travel and are stored inline (`data`); larger ones are
    uploaded first as parts, named here by the SHA-256 of each, in order.
    """

    type: str
    data: bytes | None = None
    parts: tuple[str, ...] = ()
    size: int = 0

    @property
    def inline_size(self) -> int:
        return len(self.data) if self.data is not None else 0


@dataclass(frozen=True)
class Write:
    """One pending write of a task against a checkpoint; `position` is where a page of writes resumes."""

    task_id: str
    index: int
    channel: str
    value: Blob
    task_path: str = ""
    position: str = ""


@dataclass(frozen=True)
class NewCheckpoint:
    """A checkpoint to put.

    `parent_id` is the checkpoint it continues: the put commits only while
    that is still its thread's head. Without one, `if_new_thread` asks for a
    thread that has no head yet; otherwise the put starts a new line in the
    thread, as LangGraph's own savers allow.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    if_new_thread: bool
    checkpoint: Blob
    metadata_json: str


@dataclass(frozen=True)
class CheckpointRef:
    """One checkpoint of a thread, by namespace and id: what its writes are made against."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str


@dataclass(frozen=True)
class StoredCheckpoint:
    """A checkpoint as stored, with the writes made against it so far.

    `more_writes` is set when an answer could not hold all its writes: the
    position after which the rest are read.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Blob
    metadata: dict[str, Any]
    writes: tuple[Write, ...] = ()
    position: str = ""
    more_writes: str | None = None


@dataclass(frozen=True)
class Search:
    """Which checkpoints to list, newest first within each namespace.

    No `thread_id`: every thread of the address. No `checkpoint_ns`: every
    namespace of the thread. `checkpoint_id`: that one only. `before`: ids
    below it. `metadata`: top-level keys whose values must be equal.
    `after`: the position a previous page ended at.
    """

    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    after: str | None = None


@dataclass(frozen=True)
class CheckpointPage:
    checkpoints: list[StoredCheckpoint]
    next: str | None


@dataclass(frozen=True)
class WritePage:
    writes: list[Write]
    next: str | None


@dataclass(frozen=True)
class Owner:
    """The address a write belongs to, with what its commit checks: the token's digest, and its expiry."""

    address_id: str
    read_token_digest: str
    expires_at: float | None


@dataclass(frozen=True)
class Admission:
    """A request's claim to act for an address, decided once the address's head is read.

    A store that reads the head together with its own rows (one batch) decides
    here, so the request costs no read of its own.
    """

    address_id: str
    read_token: str | None
    now: float

    @classmethod
    def of(cls, address_id: str, read_token: str | None, *, now: float) -> Admission:
        require_well_formed(address_id)
        return cls(address_id, read_token, now)

    def owner(self, record: AddressRecord | None) -> Owner:
        """The owner, if the token opens `record` (the address's head as read); `Unauthorized` otherwise."""
        found = admit(record if self.read_token else None, self.read_token, now=self.now)
        return Owner(self.address_id, credentials.digest(self.read_token or ""), found.expires_at)

    def unchecked_owner(self, expires_at: float | None) -> Owner:
        """The owner as claimed, for a commit whose address check decides (an unopened token fails it)."""
        return Owner(self.address_id, credentials.digest(self.read_token or ""), expires_at)


def owner_of(addresses: AddressStore, address_id: str, read_token: str | None, *, now: float) -> Owner:
    """The owner a request under `read_token` acts for; `Unauthorized` unless the token holds the live address."""
    admission = Admission.of(address_id, read_token, now=now)
    return admission.owner(addresses.load(address_id) if read_token else None)
