"""The address ports in memory: one `AddressMemory` of dictionaries behind one lock.

`InMemoryAddressStore`, `InMemoryStateStore`, `InMemoryRateLimiter` and
`InMemoryReadLeases` share one `AddressMemory`, as the DynamoDB adapters
share one table, and keep its rules: the same conditions decide the same
refusals, in the same order, by the clock each call is given (an expired
event or claim is gone for every read, as DynamoDB's conditions and filters
treat it before TTL reaps it). Every call is one critical section, so an
append is atomic as its transaction is. They serve tests of the use cases
(`cairn.services.Services.in_memory`); the contract suite
(`tests/contract/test_address_store_contract.py`) holds them to the
DynamoDB implementation's behaviour.

The parts of an append that belong to outbound mail (reserved outcome
slots, the daily send allowance, retried hand-offs) live in tables of their
own on DynamoDB and are refused here.
"""

from __future__ import annotations

import hmac
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from msgspec.structs import replace

from cairn import credentials
from cairn.addresses import models, ports
from cairn.addresses.inbox_settings import InboxSettings
from cairn.addresses.quota import FeedQuota
from cairn.addresses.rate_windows import WINDOW_SECONDS, retry_after, window_of
from cairn.addresses.state_model import StateEntry, StateSnapshot, StateUsage, usage_delta
from cairn.errors import Unauthorized, Unavailable

# What a digest is compared with when there is no address.
_NO_HEAD_DIGEST = "0" * 64


@dataclass(frozen=True)
class _Claim:
    ref: models.EventRef
    request_digest: str
    expires_at: int


@dataclass
class _Address:
    """Everything stored under one address: its head, events, claims, state and held reads."""

    record: models.AddressRecord
    read_window: int
    read_hits: int = 0
    events: dict[int, models.Event] = field(default_factory=dict)
    claims: dict[str, _Claim] = field(default_factory=dict)
    state: dict[str, StateEntry] = field(default_factory=dict)
    usage: StateUsage = StateUsage()
    leases: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class AddressMemory:
    """The one store the in-memory adapters share, and its one lock."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    addresses: dict[str, _Address] = field(default_factory=dict)
    # Kept apart from the addresses, as on DynamoDB: a deleted address's provisioning claim stays.
    provision_claims: dict[str, tuple[str, ports.ProvisionClaim]] = field(default_factory=dict)
    rates: dict[tuple[str, str, int, int], int] = field(default_factory=dict)
    # Each client's held reads across every address: lease → when it lapses.
    client_leases: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int) -> int | None:
        """One use of the window of `now` if fewer than `limit` were counted; else the seconds it has left."""
        counter = (scope, subject, window_seconds, window_of(now, window_seconds))
        hits = self.rates.get(counter, 0)
        if hits >= limit:
            return retry_after(now, window_seconds)
        self.rates[counter] = hits + 1
        return None

    def spent(self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int) -> int | None:
        """The seconds the window of `now` has left when `limit` uses are counted in it, else None."""
        if self.rates.get((scope, subject, window_seconds, window_of(now, window_seconds)), 0) < limit:
            return None
        return retry_after(now, window_seconds)


def _opens(address: _Address | None, digest: str, *, now: float) -> bool:
    """Whether the address is live and its read token has this digest.

    The digests are compared in constant time whatever is stored, an unknown
    address included, so a refusal costs the same for every reason.
    """
    stored = address.record.read_token_digest if address is not None else _NO_HEAD_DIGEST
    opens = hmac.compare_digest(digest, stored)
    return opens and address is not None and _live_head(address.record, now)


def _live_head(record: models.AddressRecord, now: float) -> bool:
    return record.expires_at is None or record.expires_at > int(now)


def _live(expires_at: float, now: float) -> bool:
    return expires_at > now


class InMemoryAddressStore:
    """`cairn.addresses.ports.AddressStore` in an `AddressMemory`."""

    def __init__(
        self, memory: AddressMemory, *, retention_seconds: int, max_events: int, owner_reserve: int = 0
    ) -> None:
        self._memory = memory
        self._retention = retention_seconds
        self._quota = FeedQuota(max_events, owner_reserve)

    # -- heads ---------------------------------------------------------------

    def create(
        self,
        record: models.AddressRecord,
        *,
        rate: ports.RateCount | None = None,
        claim: ports.ProvisionClaim | None = None,
    ) -> None:
        memory = self._memory
        with memory.lock:
            if claim is not None and claim.key_digest in memory.provision_claims:
                # Decided first: a retry is answered with its address even when the rate is spent.
                address_id, held = memory.provision_claims[claim.key_digest]
                raise ports.AlreadyProvisioned(address_id, held.request_digest, held.derivation)
            if record.id in memory.addresses:
                raise Unavailable()
            if rate is not None:
                wait = memory.count(
                    rate.scope, rate.subject, limit=rate.limit, now=record.created_at, window_seconds=WINDOW_SECONDS
                )
                if wait is not None:
                    raise ports.RateSpent(wait)
            if claim is not None:
                memory.provision_claims[claim.key_digest] = (record.id, claim)
            memory.addresses[record.id] = _Address(record=record, read_window=window_of(record.created_at))

    def load(self, address_id: str) -> models.AddressRecord | None:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            return None if address is None else address.record

    def admit_read(self, address_id: str, read_token_digest: str, *, limit: int, now: float) -> models.AddressRecord:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if not _opens(address, read_token_digest, now=now) or address is None:
                raise Unauthorized()
            window = window_of(now)
            if address.read_window >= window:
                if address.read_hits >= limit:
                    raise ports.RateSpent(retry_after(now))
                address.read_hits += 1
            else:
                address.read_window, address.read_hits = window, 1
            return address.record

    def delete(
        self, address_id: str, read_token_digest: str, *, before_sweep: Callable[[], None] | None = None
    ) -> bool:
        """Closed (expired from now on), then `before_sweep`, then everything under it goes; an expired address
        still admits its owner."""
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is None or not hmac.compare_digest(address.record.read_token_digest, read_token_digest):
                return False
            address.record = replace(address.record, expires_at=0)
        if before_sweep is not None:
            before_sweep()
        with self._memory.lock:
            self._memory.addresses.pop(address_id, None)
        return True

    def save_inbox_settings(
        self, address_id: str, read_token_digest: str, settings: InboxSettings, *, now: float
    ) -> bool:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if not _opens(address, read_token_digest, now=now) or address is None:
                return False
            if address.record.inbox.revision != settings.revision - 1:
                return False
            address.record = replace(address.record, inbox=settings)
            return True

    # -- appends -------------------------------------------------------------

    def append(self, request: ports.AppendRequest) -> models.AppendResult:
        """Checked in DynamoDB's order: the credential, the inbox settings, a retained duplicate, the
        quota, then the state; nothing is written unless everything passes."""
        if request.outcome_slots or request.send_allowance is not None or request.retried_handoff is not None:
            raise NotImplementedError("outbound mail's slots, allowance and hand-offs are stored on DynamoDB only")
        if len(request.events) > self._quota.capacity(request.writer):
            raise self._quota.refusal(request.writer)
        now = request.now
        with self._memory.lock:
            address = self._admitted(request)
            duplicate = self._retained_duplicate(address, request)
            if duplicate is not None:
                return duplicate
            last = address.record.last_sequence
            new_last = last + len(request.events)
            oldest_allowed = new_last - self._quota.capacity(request.writer)
            held = address.events.get(oldest_allowed)
            if oldest_allowed >= 1 and held is not None and _live(held.expires_at, int(now)):
                raise self._quota.refusal(request.writer)
            self._check_state(address, request)
            expires_at = int(now) + self._retention
            refs: list[models.EventRef] = []
            for offset, new in enumerate(request.events, start=1):
                ref = models.EventRef(
                    id=models.event_id(last + offset, credentials.new_suffix()), sequence=last + offset
                )
                refs.append(ref)
                address.events[ref.sequence] = models.Event(
                    id=ref.id,
                    sequence=ref.sequence,
                    type=new.type,
                    source=new.source,
                    data_json=new.data_json,
                    created_at=round(now, 3),
                    expires_at=expires_at,
                    ingress_surface=new.ingress_surface,
                    content_type=new.content_type,
                    headers=dict(new.headers) if new.headers is not None else None,
                    verified_by=new.verified_by,
                )
            if request.idempotency is not None and refs:
                address.claims[request.idempotency.key_digest] = _Claim(
                    refs[0], request.idempotency.request_digest, expires_at
                )
            self._apply_state(address, request)
            address.record = replace(address.record, last_sequence=new_last)
            return models.AppendResult(events=refs)

    def _admitted(self, request: ports.AppendRequest) -> _Address:
        """The live address the request's credential opens, its inbox settings as the post read them."""
        address = self._memory.addresses.get(request.address_id)
        if address is None or not _live_head(address.record, request.now):
            raise Unauthorized()
        if request.credential is not None:
            record = address.record
            stored = (
                record.read_token_digest
                if request.credential.kind is ports.CredentialKind.READ_TOKEN
                else record.inbox_secret_digest
            )
            if not hmac.compare_digest(stored, request.credential.digest):
                raise Unauthorized()
        if request.inbox_revision is not None and address.record.inbox.revision != request.inbox_revision:
            raise ports.InboxSettingsMoved(address.record.inbox)
        return address

    def _retained_duplicate(self, address: _Address, request: ports.AppendRequest) -> models.AppendResult | None:
        claims: list[models.IdempotencyClaim] = [request.idempotency] if request.idempotency is not None else []
        for claim in [*claims, *request.earlier_claims]:
            held = address.claims.get(claim.key_digest)
            if held is None or not _live(held.expires_at, int(request.now)):
                continue
            claim.check_same_request(held.request_digest)
            return models.AppendResult(events=[held.ref], duplicate=True)
        return None

    @staticmethod
    def _check_state(address: _Address, request: ports.AppendRequest) -> None:
        """`StateMoved` unless every key is still what its change was planned from and the usage fits."""
        if request.state is None:
            return
        for change in request.state.changes:
            current = address.state.get(change.key)
            if change.previous is None:
                moved = current is not None
            else:
                moved = current is None or current.revision != change.previous.revision
            if moved:
                raise ports.StateMoved()
        delta = usage_delta(request.state.changes)
        limits = request.state.limits
        if delta.bytes > 0 and address.usage.bytes > limits.max_bytes - delta.bytes:
            raise ports.StateMoved()
        if delta.keys > 0 and address.usage.keys > limits.max_keys - delta.keys:
            raise ports.StateMoved()

    @staticmethod
    def _apply_state(address: _Address, request: ports.AppendRequest) -> None:
        if request.state is None:
            return
        for change in request.state.changes:
            address.state[change.key] = StateEntry(
                key=change.key,
                revision=change.revision,
                size=change.size,
                updated_at=round(request.now, 3),
                value_json=change.value_json,
            )
        delta = usage_delta(request.state.changes)
        address.usage = StateUsage(keys=address.usage.keys + delta.keys, bytes=address.usage.bytes + delta.bytes)

    # -- reads ---------------------------------------------------------------

    def _events(self, address_id: str) -> dict[int, models.Event]:
        address = self._memory.addresses.get(address_id)
        return {} if address is None else address.events

    def list_events(self, address_id: str, *, after: int, limit: int, now: float, max_bytes: int) -> models.FeedPage:
        """As DynamoDB pages: the first event always comes, the one that crosses `max_bytes` does not."""
        with self._memory.lock:
            events = self._events(address_id)
            live = [events[sequence] for sequence in sorted(events) if sequence > after]
            live = [event for event in live if _live(event.expires_at, now)]
        page: list[models.Event] = []
        size = 0
        for event in live:
            if len(page) == limit:
                return models.FeedPage(events=page, has_more=True)
            size += models.sent_size(event)
            if page and size > max_bytes:
                return models.FeedPage(events=page, has_more=True)
            page.append(event)
        return models.FeedPage(events=page, has_more=False)

    def count_events(self, address_id: str, *, now: float) -> models.FeedCounts:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is None:
                return models.FeedCounts(retained=0, unacknowledged=0)
            last = address.record.last_sequence
            live = [e for e in address.events.values() if e.sequence <= last and _live(e.expires_at, now)]
        unacknowledged = sum(event.acknowledged_at is None for event in live)
        return models.FeedCounts(retained=len(live), unacknowledged=unacknowledged, last_sequence=last)

    def load_event(self, address_id: str, sequence: int, *, now: float) -> models.Event | None:
        with self._memory.lock:
            event = self._events(address_id).get(sequence)
        return event if event is not None and _live(event.expires_at, now) else None

    def claimed_event(self, address_id: str, key_digest: str, *, now: float) -> models.ClaimedEvent | None:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            held = None if address is None else address.claims.get(key_digest)
        if held is None or not _live(held.expires_at, now):
            return None
        return models.ClaimedEvent(ref=held.ref, request_digest=held.request_digest)

    def acknowledge(
        self, address_id: str, sequence: int, event_id_text: str, *, now: float, read_token_digest: str | None = None
    ) -> models.Acknowledged | None:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if read_token_digest is not None and not _opens(address, read_token_digest, now=now):
                raise Unauthorized()
            event = None if address is None else address.events.get(sequence)
            if address is None or event is None or event.id != event_id_text or not _live(event.expires_at, now):
                return None
            if event.acknowledged_at is not None:
                return models.Acknowledged(id=event.id, sequence=sequence, acknowledged_at=event.acknowledged_at)
            acknowledged_at = round(now, 3)
            address.events[sequence] = replace(event, acknowledged_at=acknowledged_at)
            return models.Acknowledged(id=event.id, sequence=sequence, acknowledged_at=acknowledged_at)

    def trim(self, request: ports.TrimRequest) -> models.TrimResult:
        """Remove the oldest events up to `through`; see `cairn.dynamodb.feed_trim`."""
        floor = request.floor
        with self._memory.lock:
            address = self._memory.addresses.get(request.address_id)
            if address is None or not hmac.compare_digest(address.record.read_token_digest, request.read_token_digest):
                raise Unauthorized()
            cut = request.through
            doomed: list[int] = []
            trimmed = 0
            for sequence in sorted(s for s in address.events if s <= request.through):
                event = address.events[sequence]
                live = _live(event.expires_at, request.now)
                if sequence > floor and live and event.acknowledged_at is None and not request.include_unacknowledged:
                    cut = sequence - 1
                    break
                doomed.append(sequence)
                trimmed += live and sequence > floor
            cut = max(cut, floor)
            if address.record.trimmed_through < cut:
                address.record = replace(address.record, trimmed_through=cut)
            for sequence in doomed:
                del address.events[sequence]
            return models.TrimResult(trimmed=trimmed, trimmed_through=cut)


class InMemoryStateStore:
    """`cairn.addresses.ports.StateStore` in an `AddressMemory`; writes go through the store's `append`."""

    def __init__(self, memory: AddressMemory) -> None:
        self._memory = memory

    def read(self, address_id: str, state_keys: Iterable[str]) -> StateSnapshot:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is None:
                return StateSnapshot(head=None, entries={}, usage=StateUsage())
            wanted = {key: address.state[key] for key in state_keys if key in address.state}
            return StateSnapshot(head=address.record, entries=wanted, usage=address.usage)

    def read_all(self, address_id: str) -> tuple[dict[str, StateEntry], StateUsage]:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is None:
                return {}, StateUsage()
            return dict(address.state), address.usage

    def usage(self, address_id: str) -> StateUsage:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            return StateUsage() if address is None else address.usage


class InMemoryRateLimiter:
    """`cairn.addresses.ports.RateLimiter` on the counters `InMemoryAddressStore.create` counts on."""

    def __init__(self, memory: AddressMemory) -> None:
        self._memory = memory

    def hit(
        self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
    ) -> int | None:
        with self._memory.lock:
            return self._memory.count(scope, subject, limit=limit, now=now, window_seconds=window_seconds)

    def spent(
        self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
    ) -> int | None:
        with self._memory.lock:
            return self._memory.spent(scope, subject, limit=limit, now=now, window_seconds=window_seconds)


class InMemoryReadLeases:
    """`cairn.addresses.ports.ReadLeases` on each address's map of held reads, as on its DynamoDB head."""

    def __init__(self, memory: AddressMemory) -> None:
        self._memory = memory

    def hold(self, address_id: str, kind: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is None:
                raise Unauthorized()
            return _take(address.leases.setdefault(kind, {}), lease, until=until, cap=cap, now=now)

    def release(self, address_id: str, kind: str, lease: str) -> None:
        with self._memory.lock:
            address = self._memory.addresses.get(address_id)
            if address is not None:
                address.leases.get(kind, {}).pop(lease, None)

    def hold_for_client(self, client: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        with self._memory.lock:
            return _take(self._memory.client_leases.setdefault(client, {}), lease, until=until, cap=cap, now=now)

    def release_for_client(self, client: str, lease: str) -> None:
        with self._memory.lock:
            self._memory.client_leases.get(client, {}).pop(lease, None)


def _take(held: dict[str, int], lease: str, *, until: float, cap: int, now: float) -> int | None:
    """Put `lease` in `held` while it has fewer than `cap`; else the seconds until one lapses."""
    if len(held) >= cap:
        # Leases whose holders died without releasing them free their slots once they lapse.
        for name in [name for name, lapses in held.items() if lapses <= now]:
            del held[name]
    if len(held) >= cap:
        earliest = min(held.values(), default=math.ceil(now))
        return max(1, math.ceil(earliest - now))
    held[lease] = math.ceil(until)
    return None
