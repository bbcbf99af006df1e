"""LangGraph store items on DynamoDB Local: versions under real concurrency, and large values never read torn."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn import credentials
from cairn.checkpoints.models import Owner
from cairn.dynamodb.client import make_client
from cairn.dynamodb.graph_store_table import GraphStoreTable
from cairn.errors import StoreVersionConflict, Unauthorized
from cairn.graphstore.models import PutOp
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient

NS = ("shared",)
WRITERS = 4
PUTS_EACH = 12


@pytest.fixture
def owner(local_api: LambdaClient) -> Owner:
    created = local_api.provision()
    token = created["credentials"]["read_token"]
    return Owner(created["address"]["id"], credentials.digest(token), None)


@pytest.fixture
def table(local_api: LambdaClient) -> GraphStoreTable:
    settings = local_api.services.settings
    return GraphStoreTable(make_client(settings), settings.table_name, max_bytes=settings.storage_max_bytes)


def test_concurrent_plain_puts_each_count_once_and_the_last_one_is_kept(
    table: GraphStoreTable, owner: Owner, clock: FakeClock
):
    def write_many(writer: int) -> list[int]:
        return [table.put(owner, PutOp(NS, "item", {"writer": writer, "n": n}), now=clock()) for n in range(PUTS_EACH)]

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        versions = [version for answered in pool.map(write_many, range(WRITERS)) for version in answered]

    total = WRITERS * PUTS_EACH
    assert sorted(versions) == list(range(1, total + 1))  # every put its own version: none lost, none shared
    stored = table.get(owner.address_id, NS, "item")
    assert stored is not None and stored.version == total
    assert stored.value["n"] == PUTS_EACH - 1  # some writer's last put


def test_concurrent_version_checked_increments_lose_nothing(table: GraphStoreTable, owner: Owner, clock: FakeClock):
    table.put(owner, PutOp(NS, "counter", {"n": 0}), now=clock())
    refusals = []

    def increment_many(_: int) -> None:
        for _ in range(PUTS_EACH):
            while True:
                stored = table.get(owner.address_id, NS, "counter")
                assert stored is not None
                op = PutOp(NS, "counter", {"n": stored.value["n"] + 1}, expected_version=stored.version)
                try:
                    table.put(owner, op, now=clock())
                    break
                except StoreVersionConflict as conflict:
                    assert conflict.current_version > stored.version
                    refusals.append(1)

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        list(pool.map(increment_many, range(WRITERS)))

    stored = table.get(owner.address_id, NS, "counter")
    assert stored is not None and stored.value == {"n": WRITERS * PUTS_EACH}
    assert stored.version == WRITERS * PUTS_EACH + 1


def test_a_large_value_rewritten_while_it_is_read_is_never_read_torn(
    table: GraphStoreTable, owner: Owner, clock: FakeClock
):
    values = [{"text": letter * 800_000} for letter in "ab"]
    table.put(owner, PutOp(NS, "doc", values[0]), now=clock())
    done = threading.Event()

    def rewrite() -> None:
        for round_ in range(12):
            table.put(owner, PutOp(NS, "doc", values[round_ % 2]), now=clock())
        done.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    reads = 0
    while not done.is_set() or reads == 0:
        stored = table.get(owner.address_id, NS, "doc")
        assert stored is not None and stored.value in values
        reads += 1
    writer.join()


def test_a_put_with_another_addresss_token_is_refused_and_stores_nothing(
    table: GraphStoreTable, owner: Owner, clock: FakeClock
):
    stranger = Owner(owner.address_id, credentials.digest("not the token"), None)

    with pytest.raises(Unauthorized):
        table.put(stranger, PutOp(NS, "item", {"n": 1}), now=clock())

    assert table.get(owner.address_id, NS, "item") is None


def test_versions_go_on_past_a_delete_and_an_expiry_so_a_stale_writer_is_still_refused(
    table: GraphStoreTable, owner: Owner, clock: FakeClock
):
    """A writer that read version 1 must not overwrite the item someone made again after a delete (ABA)."""
    assert table.put(owner, PutOp(NS, "doc", {"n": 1}), now=clock()) == 1
    assert table.put(owner, PutOp(NS, "doc", None), now=clock()) == 0  # deleted
    assert table.get(owner.address_id, NS, "doc") is None
    assert [item.key for item in table.under(owner.address_id, NS)] == []
    assert [namespace for namespace, _ in table.namespaces(owner.address_id, NS)] == []

    assert table.put(owner, PutOp(NS, "doc", {"n": 2}, expected_version=0), now=clock()) == 3  # made again
    with pytest.raises(StoreVersionConflict):
        table.put(owner, PutOp(NS, "doc", {"stale": True}, expected_version=1), now=clock())
    stored = table.get(owner.address_id, NS, "doc")
    assert stored is not None and stored.value == {"n": 2} and stored.version == 3

    # An item whose TTL passed is gone for readers and writers, but its version is not reused either.
    assert table.put(owner, PutOp(NS, "brief", {"n": 1}, ttl_minutes=1), now=clock()) == 1
    clock.advance(120)
    assert table.put(owner, PutOp(NS, "brief", {"n": 2}, expected_version=0), now=clock()) == 2
    with pytest.raises(StoreVersionConflict):
        table.put(owner, PutOp(NS, "brief", {"stale": True}, expected_version=1), now=clock())
