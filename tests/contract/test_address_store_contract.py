"""The address storage port, run against every implementation.

`cairn.addresses.ports.AddressStore`, `StateStore`, `RateLimiter` and
`ReadLeases` are exercised directly, as the use cases call them, on moto, on
DynamoDB Local and in memory (`cairn.addresses.inmem`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from msgspec.structs import replace

from cairn import credentials
from cairn.addresses.access import is_live
from cairn.addresses.inbox_settings import InboxSettings, Verifier
from cairn.addresses.inmem import (
    AddressMemory,
    InMemoryAddressStore,
    InMemoryRateLimiter,
    InMemoryReadLeases,
    InMemoryStateStore,
)
from cairn.addresses.models import AddressRecord, IdempotencyClaim, NewEvent
from cairn.addresses.ports import (
    AddressStore,
    AlreadyProvisioned,
    AppendRequest,
    Credential,
    CredentialKind,
    InboxSettingsMoved,
    ProvisionClaim,
    RateCount,
    RateLimiter,
    RateSpent,
    ReadLeases,
    StateMoved,
    StateStore,
    TrimRequest,
)
from cairn.addresses.quota import Writer
from cairn.addresses.state_model import KeyChange, StateChanges, StateEntry, StateLimits
from cairn.dynamodb.address_table import AddressTable
from cairn.dynamodb.client import make_client
from cairn.dynamodb.ratelimit import RateLimiter as DynamoRateLimiter
from cairn.dynamodb.read_leases import ReadLeases as DynamoReadLeases
from cairn.dynamodb.state_table import StateTable
from cairn.dynamodb.table import ensure_table
from cairn.errors import IdempotencyKeyReused, QuotaExceeded, Unauthorized
from cairn.settings import Settings

RETENTION = 3_600
MAX_EVENTS = 5
RESERVE = 2
LIMITS = StateLimits(max_keys=2, max_bytes=1_000)
READ_TOKEN = "read-token"
INBOX_SECRET = "inbox-secret"


@dataclass
class Stores:
    addresses: AddressStore
    state: StateStore
    # A second writer with its own head hints, as another process would be.
    other: AddressStore
    # A writer keeping the last RESERVE slots for the owner.
    reserved: AddressStore
    limiter: RateLimiter
    leases: ReadLeases


def _stores(client, table: str) -> Stores:
    def address_table() -> AddressTable:
        return AddressTable(client, table, retention_seconds=RETENTION, max_events=MAX_EVENTS)

    reserved = AddressTable(client, table, retention_seconds=RETENTION, max_events=MAX_EVENTS, owner_reserve=RESERVE)
    return Stores(
        addresses=address_table(),
        state=StateTable(client, table),
        other=address_table(),
        reserved=reserved,
        limiter=DynamoRateLimiter(client, table),
        leases=DynamoReadLeases(client, table),
    )


def _memory_stores() -> Stores:
    memory = AddressMemory()

    def address_store(reserve: int = 0) -> InMemoryAddressStore:
        return InMemoryAddressStore(memory, retention_seconds=RETENTION, max_events=MAX_EVENTS, owner_reserve=reserve)

    return Stores(
        addresses=address_store(),
        state=InMemoryStateStore(memory),
        other=address_store(),
        reserved=address_store(RESERVE),
        limiter=InMemoryRateLimiter(memory),
        leases=InMemoryReadLeases(memory),
    )


@pytest.fixture(params=["moto", "dynamodb_local", "memory"])
def stores(request) -> Stores:
    if request.param == "memory":
        return _memory_stores()
    if request.param == "moto":
        request.getfixturevalue("moto_env")
        client = make_client(Settings())
        ensure_table(client, "cairn-contract")
        return _stores(client, "cairn-contract")
    database = request.getfixturevalue("dynamodb_local")
    table = request.getfixturevalue("local_table")
    return _stores(make_client(Settings(dynamodb_endpoint=database.endpoint)), table)


def new_address(stores: Stores, *, now: float, expires_at: float | None = None, **create) -> AddressRecord:
    address_id = credentials.new_address_id()
    record = AddressRecord(
        id=address_id,
        task_id="task",
        name="name",
        email=f"{address_id}@example.test",
        created_at=round(now, 3),
        expires_at=expires_at,
        read_token_digest=credentials.digest(READ_TOKEN),
        inbox_secret_digest=credentials.digest(INBOX_SECRET),
    )
    stores.addresses.create(record, **create)
    return record


def inbox(secret: str = INBOX_SECRET) -> Credential:
    return Credential(CredentialKind.INBOX_SECRET, credentials.digest(secret))


def owner(token: str = READ_TOKEN) -> Credential:
    return Credential(CredentialKind.READ_TOKEN, credentials.digest(token))


def event(n: int = 0, data_json: str | None = None) -> NewEvent:
    return NewEvent(type="test.event", source="http", data_json=data_json or f'{{"n":{n}}}', ingress_surface="http")


def append(store: AddressStore, record: AddressRecord, *events: NewEvent, now: float, **extra):
    request = AppendRequest(
        address_id=record.id, events=list(events or [event()]), credential=extra.pop("credential", inbox()), now=now
    )
    return store.append(replace(request, **extra))


# An hour ahead of the real clock: DynamoDB Local's TTL reaps items by the real clock, so an
# address meant to expire "60 s after NOW" must not vanish while a long run reaches its test.
NOW = time.time() + 3_600


# -- heads -------------------------------------------------------------------------


def test_inbox_settings_are_a_compare_and_set_that_inbox_appends_are_conditioned_on(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    github = Verifier(kind="github", secret="gh", tolerance_s=None, created_at=NOW)
    first = InboxSettings(keep_headers=("x-github-event",), verifiers=(github,), revision=1)
    token = credentials.digest(READ_TOKEN)
    assert stores.addresses.save_inbox_settings(record.id, credentials.digest("wrong"), first, now=NOW) is False
    assert stores.addresses.save_inbox_settings(record.id, token, replace(first, revision=2), now=NOW) is False
    assert stores.addresses.save_inbox_settings(record.id, token, first, now=NOW) is True
    assert stores.addresses.save_inbox_settings(record.id, token, first, now=NOW) is False, "revision 1 is taken"
    assert stores.addresses.load(record.id).inbox == first

    with pytest.raises(InboxSettingsMoved) as moved:
        append(stores.other, record, event(1), now=NOW, inbox_revision=0)
    assert moved.value.settings == first
    with pytest.raises(Unauthorized):  # the credential is checked before the settings say anything
        append(stores.other, record, event(1), now=NOW, inbox_revision=0, credential=inbox("wrong"))
    kept = replace(event(1), headers={"x-github-event": "push"}, content_type="text/plain", verified_by="github")
    append(stores.addresses, record, kept, now=NOW, inbox_revision=1)
    (stored,) = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000).events
    assert (stored.headers, stored.content_type, stored.verified_by) == (
        {"x-github-event": "push"},
        "text/plain",
        "github",
    )


def test_create_load_delete(stores: Stores) -> None:
    record = new_address(stores, now=NOW, expires_at=int(NOW) + 600)
    assert stores.addresses.load(record.id) == record
    assert stores.addresses.load(credentials.new_address_id()) is None
    append(stores.addresses, record, event(1), event(2), now=NOW)

    assert stores.addresses.delete(record.id, credentials.digest("wrong")) is False
    assert stores.addresses.load(record.id) is not None
    assert stores.addresses.delete(record.id, record.read_token_digest) is True
    assert stores.addresses.load(record.id) is None
    assert stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000).events == []
    with pytest.raises(Unauthorized):
        append(stores.addresses, record, now=NOW)


def test_what_runs_before_the_sweep_sees_the_address_closed_and_its_events_still_there(stores: Stores) -> None:
    """Mail retention reads the events to find what else the address holds; nothing may be added meanwhile."""
    record = new_address(stores, now=NOW)
    append(stores.addresses, record, event(1), event(2), now=NOW)
    seen: dict[str, object] = {}

    def before_sweep() -> None:
        page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000)
        seen["events"] = [item.sequence for item in page.events]
        seen["live"] = is_live(stores.addresses, record.id, now=NOW)
        with pytest.raises(Unauthorized):
            append(stores.addresses, record, event(3), now=NOW)

    assert stores.addresses.delete(record.id, record.read_token_digest, before_sweep=before_sweep) is True
    assert seen == {"events": [1, 2], "live": False}
    assert stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000).events == []
    refused = stores.addresses.delete(record.id, credentials.digest("wrong"), before_sweep=lambda: seen.clear())
    assert refused is False and seen, "nothing runs for a refused deletion"


def test_an_expired_address_can_still_be_deleted_by_its_owner_and_no_one_else(stores: Stores) -> None:
    """TTL reclaims an expired address days late; its owner need not wait for that."""
    # Times from now, not from import: DynamoDB Local's TTL reaps items by the real clock.
    created = time.time()
    record = new_address(stores, now=created, expires_at=int(created) + 60)
    append(stores.addresses, record, event(1), now=created)
    assert not stores.addresses.load(record.id).is_live(created + 120), "expired, still stored"
    assert stores.addresses.delete(record.id, credentials.digest("wrong")) is False
    assert stores.addresses.delete(record.id, record.read_token_digest) is True
    assert stores.addresses.load(record.id) is None
    assert stores.addresses.count_events(record.id, now=NOW).retained == 0


def test_a_provisioning_claim_is_taken_once_and_outlives_its_address(stores: Stores) -> None:
    claim = ProvisionClaim(key_digest=credentials.digest(f"key-{NOW}"), request_digest=credentials.digest("body"))
    first = new_address(stores, now=NOW, claim=claim)
    second = replace(first, id=credentials.new_address_id())
    with pytest.raises(AlreadyProvisioned) as taken:
        stores.addresses.create(second, claim=claim)
    assert (taken.value.address_id, taken.value.request_digest) == (first.id, claim.request_digest)
    assert (taken.value.derivation, stores.addresses.load(second.id)) == (claim.derivation, None)
    assert stores.addresses.delete(first.id, first.read_token_digest)
    with pytest.raises(AlreadyProvisioned):
        stores.addresses.create(second, claim=claim)


def test_a_creation_counts_on_the_rate_limiter_s_window(stores: Stores) -> None:
    subject = credentials.new_address_id()
    rate = RateCount(scope="create", subject=subject, limit=2)
    assert stores.limiter.hit("create", subject, limit=2, now=NOW) is None
    kept = new_address(stores, now=NOW, rate=rate)
    refused = replace(kept, id=credentials.new_address_id())
    with pytest.raises(RateSpent) as spent:
        stores.addresses.create(refused, rate=rate)
    assert spent.value.retry_after == 60 - int(NOW) % 60
    assert stores.addresses.load(refused.id) is None
    assert stores.limiter.hit("create", subject, limit=2, now=NOW) == 60 - int(NOW) % 60
    assert stores.limiter.hit("create", subject, limit=2, now=NOW + 60) is None, "the next window"
    assert stores.limiter.hit("create", "another", limit=1, now=NOW) is None


def test_asking_whether_a_rate_is_spent_counts_nothing(stores: Stores) -> None:
    subject = credentials.new_address_id()
    for _ in range(3):
        assert stores.limiter.spent("email", subject, limit=2, now=NOW) is None
    assert stores.limiter.hit("email", subject, limit=2, now=NOW) is None
    assert stores.limiter.spent("email", subject, limit=2, now=NOW) is None, "one of two counted"
    assert stores.limiter.hit("email", subject, limit=2, now=NOW) is None
    assert stores.limiter.spent("email", subject, limit=2, now=NOW) == 60 - int(NOW) % 60
    assert stores.limiter.spent("email", subject, limit=3, now=NOW) is None, "a higher limit"
    assert stores.limiter.spent("email", subject, limit=2, now=NOW + 60) is None, "the next window"
    assert stores.limiter.spent("create", subject, limit=2, now=NOW) is None, "another scope"


def test_a_counted_read_admits_only_the_read_token_of_a_live_address(stores: Stores) -> None:
    start = (int(NOW) // 60) * 60
    record = new_address(stores, now=start, expires_at=start + 600)
    token = record.read_token_digest
    assert stores.addresses.admit_read(record.id, token, limit=2, now=start) == record
    assert stores.addresses.admit_read(record.id, token, limit=2, now=start + 1) == record
    with pytest.raises(RateSpent) as spent:
        stores.addresses.admit_read(record.id, token, limit=2, now=start + 20)
    assert spent.value.retry_after == 40
    assert stores.addresses.admit_read(record.id, token, limit=2, now=start + 60) == record
    for digest, now in ((credentials.digest("wrong"), start + 61), (token, start + 600)):
        with pytest.raises(Unauthorized):
            stores.addresses.admit_read(record.id, digest, limit=2, now=now)
    with pytest.raises(Unauthorized):
        stores.addresses.admit_read(credentials.new_address_id(), token, limit=2, now=start)


def test_held_reads_are_capped_per_address_until_released_or_lapsed(stores: Stores) -> None:
    at = float(int(NOW))  # whole seconds: a lease lapses at a whole second
    record = new_address(stores, now=at)
    hold = {"cap": 2, "now": at}
    assert stores.leases.hold(record.id, "stream", "a", until=at + 30, **hold) is None
    assert stores.leases.hold(record.id, "stream", "b", until=at + 10, **hold) is None
    assert stores.leases.hold(record.id, "poll", "c", until=at + 10, **hold) is None, "each kind has its own cap"
    assert stores.leases.hold(record.id, "stream", "c", until=at + 30, **hold) == 10
    stores.leases.release(record.id, "stream", "a")
    stores.leases.release(record.id, "stream", "never-held")
    assert stores.leases.hold(record.id, "stream", "c", until=at + 30, **hold) is None
    # b lapses at at + 10: its holder is gone, and its slot is free again.
    assert stores.leases.hold(record.id, "stream", "d", until=at + 40, cap=2, now=at + 11) is None
    assert stores.leases.hold(record.id, "stream", "e", until=at + 40, cap=2, now=at + 11) == 19
    assert stores.addresses.delete(record.id, record.read_token_digest)
    with pytest.raises(Unauthorized):
        stores.leases.hold(record.id, "stream", "f", until=at + 40, **hold)


def test_a_clients_held_reads_are_capped_across_addresses_until_released_or_lapsed(stores: Stores) -> None:
    at = float(int(NOW))
    hold = {"cap": 2, "now": at}
    assert stores.leases.hold_for_client("203.0.113.7", "a", until=at + 30, **hold) is None, "the first makes its item"
    assert stores.leases.hold_for_client("203.0.113.7", "b", until=at + 10, **hold) is None
    assert stores.leases.hold_for_client("203.0.113.7", "c", until=at + 30, **hold) == 10
    assert stores.leases.hold_for_client("2001:db8::/64", "c", until=at + 30, **hold) is None, "each client apart"
    stores.leases.release_for_client("203.0.113.7", "a")
    stores.leases.release_for_client("203.0.113.7", "never-held")
    stores.leases.release_for_client("198.51.100.1", "never-held")
    assert stores.leases.hold_for_client("203.0.113.7", "c", until=at + 30, **hold) is None
    # b lapses at at + 10: its holder is gone, and its slot is free again.
    assert stores.leases.hold_for_client("203.0.113.7", "d", until=at + 40, cap=2, now=at + 11) is None
    assert stores.leases.hold_for_client("203.0.113.7", "e", until=at + 40, cap=2, now=at + 11) == 19


# -- appends -----------------------------------------------------------------------


def test_appends_take_consecutive_sequences(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    first = append(stores.addresses, record, event(1), event(2), now=NOW)
    second = append(stores.addresses, record, event(3), now=NOW)
    assert [ref.sequence for ref in first.events + second.events] == [1, 2, 3]
    assert not first.duplicate
    page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000)
    assert [(e.sequence, e.data) for e in page.events] == [(1, {"n": 1}), (2, {"n": 2}), (3, {"n": 3})]
    assert [e.id for e in page.events] == [ref.id for ref in first.events + second.events]
    assert stores.addresses.load(record.id).last_sequence == 3


def test_a_stale_head_guess_still_appends_after_the_last_event(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    append(stores.addresses, record, event(1), event(2), now=NOW)
    # The other writer has never seen this address, and one caller guesses too high.
    assert append(stores.other, record, event(3), now=NOW).events[0].sequence == 3
    assert append(stores.other, record, event(4), now=NOW, last_sequence=40).events[0].sequence == 4
    assert append(stores.addresses, record, event(5), now=NOW, last_sequence=1).events[0].sequence == 5
    page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000)
    assert [e.data["n"] for e in page.events] == [1, 2, 3, 4, 5]


def test_an_idempotent_retry_returns_the_first_event(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    claim = IdempotencyClaim(key_digest=credentials.digest("key"), request_digest=credentials.digest("body"))
    first = append(stores.addresses, record, event(1), now=NOW, idempotency=claim)
    again = append(stores.other, record, event(1), now=NOW + 1, idempotency=claim)
    assert again.duplicate and again.events == first.events
    claimed = stores.addresses.claimed_event(record.id, claim.key_digest, now=NOW)
    assert claimed is not None and (claimed.ref, claimed.request_digest) == (first.events[0], claim.request_digest)
    counts = stores.addresses.count_events(record.id, now=NOW)
    assert counts.retained == 1

    reused = replace(claim, request_digest=credentials.digest("another body"))
    with pytest.raises(IdempotencyKeyReused):
        append(stores.addresses, record, event(2), now=NOW, idempotency=reused)


def test_a_live_earlier_claim_makes_the_append_its_duplicate_in_the_same_commit(stores: Stores) -> None:
    """How mail ingested under its receiver id is found again once ingest claims the Message-ID header."""
    record = new_address(stores, now=NOW)
    older = IdempotencyClaim(key_digest=credentials.digest("receiver-id"), request_digest=credentials.digest("m1"))
    newer = IdempotencyClaim(key_digest=credentials.digest("header-id"), request_digest=credentials.digest("h1"))
    first = append(stores.addresses, record, event(1), now=NOW, idempotency=older)
    again = append(stores.other, record, event(1), now=NOW + 1, idempotency=newer, earlier_claims=[older])
    assert again.duplicate and again.events == first.events
    assert stores.addresses.count_events(record.id, now=NOW).retained == 1
    assert stores.addresses.claimed_event(record.id, newer.key_digest, now=NOW) is None, "checked, never taken"
    fresh = append(
        stores.addresses,
        record,
        event(2),
        now=NOW,
        idempotency=newer,
        earlier_claims=[
            IdempotencyClaim(key_digest=credentials.digest("never-used"), request_digest=credentials.digest("x"))
        ],
    )
    assert not fresh.duplicate and fresh.events[0].sequence == 2


def test_an_expired_claim_is_free_again(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    claim = IdempotencyClaim(key_digest=credentials.digest("key"), request_digest=credentials.digest("body"))
    append(stores.addresses, record, event(1), now=NOW, idempotency=claim)
    later = NOW + RETENTION + 1
    assert stores.addresses.claimed_event(record.id, claim.key_digest, now=later) is None
    result = append(stores.addresses, record, event(2), now=later, idempotency=claim)
    assert not result.duplicate and result.events[0].sequence == 2


def test_the_feed_holds_at_most_max_events(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    append(stores.addresses, record, *[event(n) for n in range(MAX_EVENTS)], now=NOW)
    with pytest.raises(QuotaExceeded):
        append(stores.addresses, record, event(), now=NOW)
    assert stores.addresses.load(record.id).last_sequence == MAX_EVENTS
    # Once the retained events expire, the feed has room again.
    assert append(stores.addresses, record, event(), now=NOW + RETENTION + 1).events[0].sequence == MAX_EVENTS + 1


def test_only_the_owner_fills_the_reserved_slots(stores: Stores) -> None:
    reserved = stores.reserved
    record = new_address(stores, now=NOW)
    append(reserved, record, *[event(n) for n in range(MAX_EVENTS - RESERVE)], now=NOW)
    for outsider in (inbox(), None):
        with pytest.raises(QuotaExceeded):
            append(reserved, record, event(), now=NOW, credential=outsider)
    owned = append(reserved, record, event(), event(), now=NOW, credential=owner(), writer=Writer.OWNER)
    assert [ref.sequence for ref in owned.events] == [MAX_EVENTS - 1, MAX_EVENTS]
    with pytest.raises(QuotaExceeded):
        append(reserved, record, event(), now=NOW, credential=owner(), writer=Writer.OWNER)


def test_a_trim_removes_the_oldest_events_and_frees_their_slots(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    refs = append(stores.addresses, record, *[event(n) for n in range(MAX_EVENTS)], now=NOW).events
    stores.addresses.acknowledge(record.id, 1, refs[0].id, now=NOW)
    stores.addresses.acknowledge(record.id, 3, refs[2].id, now=NOW)
    digest = credentials.digest(READ_TOKEN)
    trim = {"last": MAX_EVENTS, "now": NOW}
    acked = stores.addresses.trim(
        TrimRequest(record.id, digest, floor=0, through=4, include_unacknowledged=False, **trim)
    )
    assert (acked.trimmed, acked.trimmed_through) == (1, 1), "stops before event 2, not acknowledged"
    everything = stores.addresses.trim(
        TrimRequest(record.id, digest, floor=1, through=3, include_unacknowledged=True, **trim)
    )
    assert (everything.trimmed, everything.trimmed_through) == (2, 3)
    assert stores.addresses.load(record.id).trimmed_through == 3
    page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000)
    assert [e.sequence for e in page.events] == [4, 5]
    assert append(stores.addresses, record, event(), event(), event(), now=NOW).events[0].sequence == 6
    with pytest.raises(QuotaExceeded):
        append(stores.addresses, record, event(), now=NOW)
    with pytest.raises(Unauthorized):
        stores.addresses.trim(
            TrimRequest(
                record.id, credentials.digest("wrong"), floor=3, through=5, include_unacknowledged=True, last=8, now=NOW
            )
        )
    counts = stores.addresses.count_events(record.id, now=NOW)
    assert (counts.retained, counts.unacknowledged) == (5, 5)


@pytest.mark.parametrize(
    "credential",
    [inbox("wrong secret"), owner("wrong token"), owner(INBOX_SECRET), Credential(CredentialKind.INBOX_SECRET, "")],
    ids=["wrong-secret", "wrong-token", "secret-as-token", "empty"],
)
def test_a_wrong_credential_is_refused_and_appends_nothing(stores: Stores, credential: Credential) -> None:
    record = new_address(stores, now=NOW)
    with pytest.raises(Unauthorized):
        append(stores.addresses, record, now=NOW, credential=credential)
    assert stores.addresses.load(record.id).last_sequence == 0
    assert stores.addresses.count_events(record.id, now=NOW).retained == 0


def test_each_credential_opens_only_a_live_address(stores: Stores) -> None:
    record = new_address(stores, now=NOW, expires_at=int(NOW) + 60)
    assert append(stores.addresses, record, now=NOW, credential=owner()).events[0].sequence == 1
    assert append(stores.addresses, record, now=NOW, credential=inbox()).events[0].sequence == 2
    assert append(stores.addresses, record, now=NOW, credential=None).events[0].sequence == 3
    for credential in (owner(), inbox(), None):
        with pytest.raises(Unauthorized):
            append(stores.addresses, record, now=NOW + 61, credential=credential)
    unknown = replace(record, id=credentials.new_address_id())
    with pytest.raises(Unauthorized):
        append(stores.addresses, unknown, now=NOW, credential=None)


# -- reads ---------------------------------------------------------------------------


def test_pages_counts_loads_and_acknowledgements(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    refs = append(stores.addresses, record, *[event(n) for n in range(1, 5)], now=NOW).events
    page = stores.addresses.list_events(record.id, after=1, limit=2, now=NOW, max_bytes=10_000)
    assert [e.sequence for e in page.events] == [2, 3] and page.has_more
    page = stores.addresses.list_events(record.id, after=3, limit=2, now=NOW, max_bytes=10_000)
    assert [e.sequence for e in page.events] == [4] and not page.has_more
    # The byte budget stops a page after the event that crosses it, never before the first.
    page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=1)
    assert [e.sequence for e in page.events] == [1] and page.has_more

    loaded = stores.addresses.load_event(record.id, 2, now=NOW)
    assert loaded is not None and loaded.id == refs[1].id and loaded.data == {"n": 2}
    assert loaded.type == "test.event" and loaded.source == "http" and loaded.acknowledged_at is None
    assert stores.addresses.load_event(record.id, 9, now=NOW) is None

    acked = stores.addresses.acknowledge(record.id, 2, refs[1].id, now=NOW + 5)
    assert acked is not None and acked.acknowledged_at == pytest.approx(NOW + 5, abs=0.01)
    again = stores.addresses.acknowledge(record.id, 2, refs[1].id, now=NOW + 9)
    assert again is not None and again.acknowledged_at == acked.acknowledged_at
    assert stores.addresses.acknowledge(record.id, 3, refs[1].id, now=NOW) is None
    assert stores.addresses.acknowledge(record.id, 9, "evt_9_x", now=NOW) is None
    counts = stores.addresses.count_events(record.id, now=NOW)
    assert (counts.retained, counts.unacknowledged) == (4, 3)


def test_expired_events_are_gone_for_every_read(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    ref = append(stores.addresses, record, event(1), now=NOW).events[0]
    later = NOW + RETENTION + 1
    assert stores.addresses.list_events(record.id, after=0, limit=10, now=later, max_bytes=10_000).events == []
    assert stores.addresses.count_events(record.id, now=later).retained == 0
    assert stores.addresses.load_event(record.id, 1, now=later) is None
    assert stores.addresses.acknowledge(record.id, 1, ref.id, now=later) is None


def test_large_events_round_trip_byte_for_byte(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    data_json = '{"text":"' + "é🙂x" * 120_000 + '"}'
    small = event(2)
    append(stores.addresses, record, event(data_json=data_json), small, now=NOW)
    page = stores.addresses.list_events(record.id, after=0, limit=10, now=NOW, max_bytes=10_000_000)
    assert [e.data_json for e in page.events] == [data_json, small.data_json]
    assert stores.addresses.load_event(record.id, 1, now=NOW).data_json == data_json
    assert stores.addresses.delete(record.id, record.read_token_digest)


# -- state ---------------------------------------------------------------------------


def change(key: str, value_json: str | None, previous: StateEntry | None) -> KeyChange:
    revision = (previous.revision if previous is not None else 0) + 1
    size = 0 if value_json is None else len(key) + len(value_json) + 32
    return KeyChange(key=key, previous=previous, revision=revision, size=size, value_json=value_json)


def commit(stores: Stores, record: AddressRecord, *changes: KeyChange, limits: StateLimits = LIMITS, now=NOW):
    events = [event(index) for index, _ in enumerate(changes)]
    state = StateChanges(changes=list(changes), limits=limits, expires_at=record.expires_at)
    return append(stores.addresses, record, *events, now=now, credential=owner(), state=state)


def test_state_changes_commit_with_their_events(stores: Stores) -> None:
    record = new_address(stores, now=NOW, expires_at=int(NOW) + 600)
    empty = stores.state.read(record.id, ["a"])
    assert empty.head == record and empty.entries == {} and (empty.usage.keys, empty.usage.bytes) == (0, 0)

    commit(stores, record, change("a", '{"x":1}', None), change("b", "2", None), now=NOW)
    snapshot = stores.state.read(record.id, ["a", "b", "c"])
    assert {k: (e.revision, e.value) for k, e in snapshot.entries.items()} == {"a": (1, {"x": 1}), "b": (1, 2)}
    assert snapshot.entries["a"].updated_at == pytest.approx(NOW, abs=0.01)
    assert (snapshot.usage.keys, snapshot.usage.bytes) == (2, 40 + 34)
    assert snapshot.head.last_sequence == 2
    entries, usage = stores.state.read_all(record.id)
    assert set(entries) == {"a", "b"} and usage == snapshot.usage
    assert stores.state.usage(record.id) == snapshot.usage


def test_a_moved_key_refuses_the_whole_commit(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    commit(stores, record, change("a", "1", None))
    stale = stores.state.read(record.id, ["a"]).entries["a"]
    commit(stores, record, change("a", "2", stale))
    with pytest.raises(StateMoved):
        commit(stores, record, change("a", "3", stale))
    with pytest.raises(StateMoved):
        commit(stores, record, change("b", "1", None), change("a", "3", None))
    snapshot = stores.state.read(record.id, ["a", "b"])
    assert set(snapshot.entries) == {"a"} and snapshot.entries["a"].value == 2
    # Nothing of a refused commit lands: no event, no usage.
    assert snapshot.head.last_sequence == 2
    assert snapshot.usage.keys == 1


def test_moved_usage_refuses_growth_beyond_the_limits(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    commit(stores, record, change("a", "1", None), change("b", "1", None))
    # Planned as if the address had room: the stored usage says otherwise.
    with pytest.raises(StateMoved):
        commit(stores, record, change("c", "1", None))
    small = StateLimits(max_keys=10, max_bytes=80)
    with pytest.raises(StateMoved):
        commit(stores, record, change("c", "1", None), limits=small)
    assert stores.state.usage(record.id).keys == 2
    # Shrinking always fits.
    current = stores.state.read(record.id, ["a"]).entries["a"]
    commit(stores, record, change("a", None, current), limits=small)
    assert stores.state.usage(record.id).keys == 1


def test_deleted_keys_leave_tombstones_that_keep_their_revision(stores: Stores) -> None:
    record = new_address(stores, now=NOW)
    commit(stores, record, change("a", '"v"', None))
    first = stores.state.read(record.id, ["a"]).entries["a"]
    commit(stores, record, change("a", None, first))
    tombstone = stores.state.read(record.id, ["a"]).entries["a"]
    assert not tombstone.exists and tombstone.value is None and tombstone.revision == 2
    entries, usage = stores.state.read_all(record.id)
    assert not entries["a"].exists and (usage.keys, usage.bytes) == (0, 0)
    commit(stores, record, change("a", '"w"', tombstone))
    again = stores.state.read(record.id, ["a"]).entries["a"]
    assert again.exists and again.revision == 3 and again.value == "w"
