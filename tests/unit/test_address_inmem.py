"""The in-memory address ports under concurrent writers: one lock makes each call atomic.

Their behaviour is the contract suite's (`tests/contract/test_address_store_contract.py`);
this is what DynamoDB's transactions give there and the lock must give here.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from cairn import credentials
from cairn.addresses.inmem import AddressMemory, InMemoryAddressStore, InMemoryStateStore
from cairn.addresses.models import AddressRecord, NewEvent
from cairn.addresses.ports import AppendRequest, Credential, CredentialKind, StateMoved
from cairn.addresses.quota import Writer
from cairn.addresses.state_model import KeyChange, StateChanges, StateLimits
from cairn.errors import QuotaExceeded

NOW = 1_800_000_000.0
TOKEN = credentials.digest("read-token")
WRITERS = 8


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Threads switch every microsecond, so writers interleave inside a call unless it is atomic."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def store(memory: AddressMemory, max_events: int) -> InMemoryAddressStore:
    return InMemoryAddressStore(memory, retention_seconds=3_600, max_events=max_events)


def new_address(store: InMemoryAddressStore) -> AddressRecord:
    address_id = credentials.new_address_id()
    record = AddressRecord(
        id=address_id,
        task_id=None,
        name=None,
        email=f"{address_id}@example.test",
        created_at=NOW,
        expires_at=None,
        read_token_digest=TOKEN,
        inbox_secret_digest=credentials.digest("inbox-secret"),
    )
    store.create(record)
    return record


def request(record: AddressRecord, n: int, state: StateChanges | None = None) -> AppendRequest:
    event = NewEvent(type="test.event", source="http", data_json=f'{{"n":{n}}}', ingress_surface="http")
    owner = Credential(CredentialKind.READ_TOKEN, TOKEN)
    return AppendRequest(record.id, [event], owner, NOW, state=state, writer=Writer.OWNER)


def together(work: Callable[[int], None]) -> None:
    start = threading.Barrier(WRITERS)

    def run(index: int) -> None:
        start.wait()
        work(index)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_concurrent_appends_from_two_stores_lose_nothing_and_share_no_sequence() -> None:
    memory = AddressMemory()
    stores = [store(memory, max_events=1_000), store(memory, max_events=1_000)]
    record = new_address(stores[0])
    sequences: list[int] = []

    def append(index: int) -> None:
        for n in range(25):
            sequences.extend(ref.sequence for ref in stores[index % 2].append(request(record, n)).events)

    together(append)
    assert sorted(sequences) == list(range(1, WRITERS * 25 + 1))
    assert stores[1].count_events(record.id, now=NOW).retained == WRITERS * 25
    assert stores[0].load(record.id).last_sequence == WRITERS * 25


def test_concurrent_appends_never_pass_the_quota() -> None:
    memory = AddressMemory()
    writer = store(memory, max_events=50)
    record = new_address(writer)
    refused: list[int] = []

    def append(index: int) -> None:
        for n in range(10):
            try:
                writer.append(request(record, n))
            except QuotaExceeded:
                refused.append(index)

    together(append)
    assert writer.count_events(record.id, now=NOW).retained == 50
    assert len(refused) == WRITERS * 10 - 50


def test_concurrent_state_writers_never_pass_the_key_limit() -> None:
    memory = AddressMemory()
    writer = store(memory, max_events=1_000)
    record = new_address(writer)
    limits = StateLimits(max_keys=3, max_bytes=10_000)
    moved: list[int] = []

    def create_key(index: int) -> None:
        # Each plans from an empty address, as a writer that read before the others committed.
        change = KeyChange(key=f"k{index}", previous=None, revision=1, size=10, value_json="1")
        try:
            writer.append(request(record, index, StateChanges([change], limits, expires_at=None)))
        except StateMoved:
            moved.append(index)

    together(create_key)
    entries, usage = InMemoryStateStore(memory).read_all(record.id)
    assert (len(entries), usage.keys, usage.bytes) == (3, 3, 30)
    assert len(moved) == WRITERS - 3
