"""Held reads per address and per client on DynamoDB Local: each cap holds under racing processes, a
lapsed lease (its holder died) frees its slot, a deleted address holds nothing, and a client's item
expires a day after its last take."""

from __future__ import annotations

import uuid

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.read_leases import ReadLeases
from cairn.errors import Unauthorized
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services, path_of
from tests.support.processes import process_context

CAP = 5
NOW = 1_800_000_000.0


def leases(endpoint: str, table: str) -> ReadLeases:
    return ReadLeases(make_client(Settings(dynamodb_endpoint=endpoint)), table)


def take_many(endpoint: str, table: str, address_id: str, tries: int) -> list[bool]:
    store = leases(endpoint, table)
    return [
        store.hold(address_id, "streams", uuid.uuid4().hex, until=NOW + 600, cap=CAP, now=NOW) is None
        for _ in range(tries)
    ]


def take_many_for_client(endpoint: str, table: str, client: str, tries: int) -> list[bool]:
    store = leases(endpoint, table)
    return [
        store.hold_for_client(client, uuid.uuid4().hex, until=NOW + 600, cap=CAP, now=NOW) is None for _ in range(tries)
    ]


@pytest.fixture
def api(dynamodb_local, local_table: str, clock: FakeClock) -> LambdaClient:
    return LambdaClient(make_services(table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock))


def test_racing_processes_take_exactly_the_cap(dynamodb_local, local_table: str, api: LambdaClient):
    address_id = api.provision()["address"]["id"]
    context = process_context()
    with context.Pool(4) as pool:
        taken = pool.starmap(take_many, [(dynamodb_local.endpoint, local_table, address_id, 4)] * 4)
    assert sum(sum(results) for results in taken) == CAP
    refused = leases(dynamodb_local.endpoint, local_table).hold(
        address_id, "streams", "late", until=NOW + 600, cap=CAP, now=NOW
    )
    assert refused is not None and 1 <= refused <= 600 + 1


def test_a_released_or_lapsed_lease_frees_its_slot_and_kinds_are_counted_apart(
    dynamodb_local, local_table: str, api: LambdaClient
):
    address_id = api.provision()["address"]["id"]
    store = leases(dynamodb_local.endpoint, local_table)
    assert store.hold(address_id, "streams", "a", until=NOW + 10, cap=2, now=NOW) is None
    assert store.hold(address_id, "streams", "b", until=NOW + 30, cap=2, now=NOW) is None
    assert store.hold(address_id, "streams", "c", until=NOW + 30, cap=2, now=NOW) == 10
    assert store.hold(address_id, "waits", "w", until=NOW + 30, cap=2, now=NOW) is None, "its own slots"
    store.release(address_id, "streams", "b")
    assert store.hold(address_id, "streams", "c", until=NOW + 30, cap=2, now=NOW) is None
    # "a" was never released (its holder died): once it lapses, its slot is taken over.
    assert store.hold(address_id, "streams", "d", until=NOW + 40, cap=2, now=NOW + 5) == 5
    assert store.hold(address_id, "streams", "d", until=NOW + 40, cap=2, now=NOW + 11) is None
    store.release(address_id, "streams", "a")  # a late release of a lapsed lease changes nothing
    assert store.hold(address_id, "streams", "e", until=NOW + 40, cap=2, now=NOW + 11) is not None


def test_a_deleted_address_holds_nothing(dynamodb_local, local_table: str, api: LambdaClient):
    created = api.provision()
    address_id = created["address"]["id"]
    store = leases(dynamodb_local.endpoint, local_table)
    assert store.hold(address_id, "streams", "a", until=NOW + 10, cap=2, now=NOW) is None
    url = path_of(created["endpoints"]["address_url"])
    assert api.request("DELETE", url, token=created["credentials"]["read_token"]).status == 200
    with pytest.raises(Unauthorized):
        store.hold(address_id, "streams", "b", until=NOW + 10, cap=2, now=NOW)
    with pytest.raises(Unauthorized):
        store.hold("never-provisioned", "streams", "b", until=NOW + 10, cap=2, now=NOW)
    store.release(address_id, "streams", "a")  # nothing to free, and no item made


def test_racing_processes_take_exactly_a_clients_cap_and_its_item_expires_a_day_after(dynamodb_local, local_table: str):
    context = process_context()
    with context.Pool(4) as pool:
        taken = pool.starmap(take_many_for_client, [(dynamodb_local.endpoint, local_table, "203.0.113.7", 4)] * 4)
    assert sum(sum(results) for results in taken) == CAP
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    item = client.get_item(TableName=local_table, Key={"pk": {"S": "CLIENT#203.0.113.7"}, "sk": {"S": "HELD"}})["Item"]
    assert len(item["held_reads"]["M"]) == CAP
    assert int(item["expires_at"]["N"]) == int(NOW) + 86_400


def test_a_clients_first_take_makes_its_item_in_two_calls_and_later_takes_need_one(dynamodb_local, local_table: str):
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    store = ReadLeases(client, local_table)

    # The failed take says there is no item (its condition returns none), so the item is made at once.
    assert store.hold_for_client("198.51.100.9", "first", until=NOW + 600, cap=2, now=NOW) is None
    assert calls == ["UpdateItem", "UpdateItem"]
    calls.clear()
    assert store.hold_for_client("198.51.100.9", "second", until=NOW + 600, cap=2, now=NOW) is None
    assert calls == ["UpdateItem"]
    calls.clear()
    # A full item comes back with the refused take: the refusal is one call too.
    assert store.hold_for_client("198.51.100.9", "third", until=NOW + 600, cap=2, now=NOW) == 600
    assert calls == ["UpdateItem"]
