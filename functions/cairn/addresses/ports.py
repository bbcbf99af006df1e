"""What the address use cases need from storage, in their own terms.

`cairn.dynamodb` implements these protocols, and `cairn.addresses.inmem` in
memory for tests; the use cases name neither tables nor attributes nor keys.
One contract suite (`tests/contract/test_address_store_contract.py`) runs
against every implementation.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import msgspec

from cairn.addresses import models
from cairn.addresses.inbox_settings import InboxSettings
from cairn.addresses.quota import Writer
from cairn.addresses.state_model import StateChanges, StateEntry, StateSnapshot, StateUsage


class CredentialKind(enum.Enum):
    """Which of an address's two secrets a writer presents."""

    READ_TOKEN = "read_token"
    INBOX_SECRET = "inbox_secret"


class Credential(msgspec.Struct, frozen=True):
    """The digest of the secret a caller presented, and which secret it claims to be."""

    kind: CredentialKind
    digest: str


class AppendRequest(msgspec.Struct):
    """Events to append atomically, under a credential.

    `credential` None is for trusted internal writers (inbound email) that
    need only a live address, never for a client request.

    `state` joins the same commit: the keys change and the events are
    appended together or not at all; `StateMoved` when a key or the usage
    is no longer what the changes were planned from.
    """

    address_id: str
    events: Sequence[models.NewEvent]
    credential: Credential | None
    now: float
    idempotency: models.IdempotencyClaim | None = None
    # Claims an earlier form of the same request may hold (checked, never taken): a live one makes
    # the append a duplicate of its event, decided in the same commit.
    earlier_claims: Sequence[models.IdempotencyClaim] = ()
    state: StateChanges | None = None
    # The head's sequence when the caller has just read it; else a guess.
    last_sequence: int | None = None
    # Feed slots held for events promised later (an outbound mail's outcome): +1 reserves one
    # beside these events, -1 spends a reservation on them. Reserved slots count as used.
    outcome_slots: int = 0
    # Required with a reservation, and stored in its commit: when the slot is spent anyway if the
    # promised event has not come by then (no slot is held forever).
    outcome_deadline: OutcomeDeadline | None = None
    # A send counted against the address's daily allowance in the same commit.
    send_allowance: SendAllowance | None = None
    # Whose slots the events may take (`cairn.addresses.quota`): only the owner's writes reach the reserve.
    writer: Writer = Writer.OUTSIDER
    # The inbox settings revision the events were checked against (inbox posts): `InboxSettingsMoved`
    # when the head holds another, after the credential is checked.
    inbox_revision: int | None = None
    # A send's failed hand-off attempt that this commit opens the next attempt of (with no events, one
    # reserved slot and its deadline): `HandoffMoved` unless that attempt is still the send's last and failed.
    retried_handoff: RetriedHandoff | None = None


class TrimRequest(msgspec.Struct, frozen=True):
    """The oldest events of a feed to remove, up to `through`, under the read token's digest.

    Only acknowledged events go, unless `include_unacknowledged`: the trim
    stops before the first live event not yet acknowledged. `floor` and
    `last` are the head's `trimmed_through` and `last_sequence` as the
    caller read them.
    """

    address_id: str
    read_token_digest: str
    floor: int
    last: int
    through: int
    include_unacknowledged: bool
    now: float


class RetriedHandoff(msgspec.Struct, frozen=True):
    """The send at `sequence`, whose hand-off attempt `attempt` the carrier refused, leased until `lease_until`."""

    sequence: int
    attempt: int
    lease_until: float


class OutcomeDeadline(msgspec.Struct, frozen=True):
    """When a reserved outcome slot is due (epoch seconds), and the message whose outcome it waits for."""

    at: float
    message_id: str
    # The send whose outcome it waits for, when the commit appends no event (a retried hand-off), and
    # which hand-off attempt of it: each attempt has its own slot and outcome.
    send: models.EventRef | None = None
    attempt: int = 1


class SendAllowance(msgspec.Struct, frozen=True):
    """At most `limit` sends per address per UTC day; a refusal is `RateLimited` until the next day."""

    limit: int


class HandoffMoved(Exception):
    """The send's last hand-off attempt is no longer the failed one a retry read: another retry opened the next."""

    def __init__(self) -> None:
        super().__init__("the send's hand-off moved since it was read")


class StateMoved(Exception):
    """A state key or the usage changed since the changes were planned: read again and re-plan."""

    def __init__(self) -> None:
        super().__init__("state changed since it was read")


class InboxSettingsMoved(Exception):
    """The inbox settings are not the revision an inbox post was checked against: these are current."""

    def __init__(self, settings: InboxSettings) -> None:
        super().__init__("inbox settings changed since they were read")
        self.settings = settings


class RateSpent(Exception):
    """A rate counted in the same write as something else is used up for its window."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("rate spent for this window")
        self.retry_after = retry_after


class CredentialDerivation(enum.StrEnum):
    """How an address provisioned under an `Idempotency-Key` derived its credentials, kept with its claim."""

    # Before the server secret: HMACs under the client's key alone. Claims from then carry no mark.
    KEY = "key"
    # HMACs under a key derived from the server secret and the client's key (`ServerSecret.provisioning_key`).
    SERVER_SECRET = "server-secret"


class ProvisionClaim(msgspec.Struct, frozen=True):
    """The claim a provisioning `Idempotency-Key` makes, stored in the same write as the new head."""

    key_digest: str
    request_digest: str
    derivation: CredentialDerivation = CredentialDerivation.SERVER_SECRET


class AlreadyProvisioned(Exception):
    """A provisioning `Idempotency-Key` was claimed before: by which address, for which request, and how
    that address derived its credentials."""

    def __init__(
        self, address_id: str, request_digest: str, derivation: CredentialDerivation = CredentialDerivation.KEY
    ) -> None:
        super().__init__("this key provisioned an address before")
        self.address_id = address_id
        self.request_digest = request_digest
        self.derivation = derivation


class RateCount(msgspec.Struct, frozen=True):
    """One use of a fixed per-minute window of `scope` for `subject`, at most `limit` uses."""

    scope: str
    subject: str
    limit: int


class AddressStore(Protocol):
    """Address heads, their event feeds and idempotency claims."""

    def create(
        self, record: models.AddressRecord, *, rate: RateCount | None = None, claim: ProvisionClaim | None = None
    ) -> None:
        """Store a new address head; with `rate`, only if one more use fits (`RateSpent` otherwise), in the
        same write; with `claim`, only if its key claimed no address before (`AlreadyProvisioned`
        otherwise, with nothing written or counted)."""

    def load(self, address_id: str) -> models.AddressRecord | None:
        """The head of a live or expired address; None once deleted or unknown."""

    def admit_read(self, address_id: str, read_token_digest: str, *, limit: int, now: float) -> models.AddressRecord:
        """The live address the digest opens, with one read counted against its per-minute read rate of
        `limit`, in one write. `Unauthorized` for an unknown, expired or deleted address or another digest
        (one refusal, nothing counted); `RateSpent` when the digest opens it but the rate is used up."""

    def delete(
        self, address_id: str, read_token_digest: str, *, before_sweep: Callable[[], None] | None = None
    ) -> bool:
        """Remove the address and all it holds if the digest opens it, expired or not; False when refused.

        The address is closed first (nothing more is appended to it, and it
        reads as gone), then `before_sweep` runs, while its events can still
        be read, then everything goes.
        """

    def append(self, request: AppendRequest) -> models.AppendResult:
        """Append atomically with consecutive sequences.

        Raises `Unauthorized` (dead address or wrong credential),
        `IdempotencyKeyReused`, `QuotaExceeded`, `StateMoved`, `InboxSettingsMoved`, `Unavailable`.
        A retained idempotency claim with the same request returns the first
        result with `duplicate`.
        """

    def save_inbox_settings(
        self, address_id: str, read_token_digest: str, settings: InboxSettings, *, now: float
    ) -> bool:
        """Store `settings` if the digest opens the live address and its settings are at `settings.revision - 1`.

        False when refused either way: the caller reads again to tell which.
        """

    def list_events(self, address_id: str, *, after: int, limit: int, now: float, max_bytes: int) -> models.FeedPage:
        """Up to `limit` live events after sequence `after`, oldest first, about `max_bytes` of data."""

    def count_events(self, address_id: str, *, now: float) -> models.FeedCounts:
        """Live events, how many of them are not acknowledged, and the last sequence they were counted at."""

    def load_event(self, address_id: str, sequence: int, *, now: float) -> models.Event | None:
        """One live event by its sequence, or None."""

    def claimed_event(self, address_id: str, key_digest: str, *, now: float) -> models.ClaimedEvent | None:
        """The event a live idempotency claim points to, with the claiming request's digest, or None."""

    def acknowledge(
        self, address_id: str, sequence: int, event_id_text: str, *, now: float, read_token_digest: str | None = None
    ) -> models.Acknowledged | None:
        """Mark a live event handled (the first time is kept); None if there is no such event.

        With `read_token_digest`, the digest opening the live address is a condition of the same write:
        `Unauthorized` otherwise, whatever the event."""

    def trim(self, request: TrimRequest) -> models.TrimResult:
        """Remove the oldest events up to `through`, stopping before the first live unacknowledged one
        unless `include_unacknowledged`; the head keeps how far the feed is trimmed (`floor` and `last`
        as read).
        `Unauthorized` when the digest no longer opens the address."""


class StateStore(Protocol):
    """Consistent reads of an address's state; writes go through `AddressStore.append`."""

    def read(self, address_id: str, state_keys: Iterable[str]) -> StateSnapshot:
        """Head, usage and the given keys (tombstones included) in one consistent read."""

    def read_all(self, address_id: str) -> tuple[dict[str, StateEntry], StateUsage]:
        """Every key (tombstones included) and the usage."""

    def usage(self, address_id: str) -> StateUsage:
        """The address's key and byte totals."""


class RateLimiter(Protocol):
    def hit(self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = 60) -> int | None:
        """Count one use in a fixed window; the seconds to wait when over `limit`, else None."""

    def spent(self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = 60) -> int | None:
        """The seconds to wait when `limit` uses are counted in the window of `now`, else None; counts nothing."""


class Subscription(Protocol):
    def wait(self, timeout: float) -> None:
        """Return after a possible change or after `timeout` seconds."""


class ReadLeases(Protocol):
    """Reads of a feed that hold a connection open (event streams, waiting long-polls), capped per address."""

    def hold(self, address_id: str, kind: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        """Take `lease` of `kind` until `until` while the address holds fewer than `cap` of that kind.

        None once taken; else the seconds until a held one lapses. Raises
        `Unauthorized` for an address that is gone.
        """

    def release(self, address_id: str, kind: str, lease: str) -> None:
        """Free `lease` at once."""

    def hold_for_client(self, client: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        """Take `lease` until `until` while `client` holds fewer than `cap` reads across every address.

        None once taken; else the seconds until one of its leases lapses.
        """

    def release_for_client(self, client: str, lease: str) -> None:
        """Free the client's `lease` at once."""


class Waiter(Protocol):
    """How a long-poll learns that its feed may have grown."""

    def subscribe(self, address_id: str) -> AbstractContextManager[Subscription]:
        """Watch an address for appends while the context is open."""

    def notify(self, address_id: str) -> None:
        """Tell watchers of an address that an append committed."""
