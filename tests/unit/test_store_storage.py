"""LangGraph store items count against their address's storage limit, on moto.

A put moves the address's count by what the item counts less what it
replaces; a delete gives the item's room back; an item whose TTL passed
gives its room back when a put needs it.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cairn.client import Address, HttpClient
from cairn.errors import StorageLimitExceeded
from cairn.integrations.langgraph import CairnStore
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply
from tests.support.storage_usage import counted, counted_items

NS = ("notes",)
VALUE = {"text": "x" * 3_000}


def on_moto(clock: FakeClock, limit: int) -> tuple[LambdaClient, Address]:
    api = LambdaClient.on_moto(clock, storage_max_bytes=limit)
    return api, Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


def put(api: LambdaClient, address: Address, key: str, value: dict[str, Any], **op: Any) -> Reply:
    body = {"ops": [{"op": "put", "namespace": list(NS), "key": key, "value": value, **op}]}
    url = f"/api/v1/addresses/{address.id}/store/batch"
    return api.request("POST", url, json_body=body, token=address.read_token)


def usage(api: LambdaClient, address: Address) -> int:
    """The address's count, checked against what its stored items say they count."""
    used = counted(api.services.settings, address.id)
    assert used == counted_items(api.services.settings, address.id)
    return used


def cost_of_one(clock: FakeClock) -> int:
    """What an item of VALUE under a one-letter key counts, measured on an address with room."""
    api, address = on_moto(clock, 10_000_000)
    assert put(api, address, "k", VALUE).status == 200
    return usage(api, address)


def test_items_fill_the_limit_exactly_and_a_put_past_it_stores_nothing(moto_env: None, clock: FakeClock):
    cost = cost_of_one(clock)
    assert 3_000 < cost < 3_000 + 400  # the value's JSON, its key, namespace, version and times, and its row
    api, address = on_moto(clock, 3 * cost - 1)
    assert [put(api, address, key, VALUE).status for key in "ab"] == [200, 200]

    refused = put(api, address, "c", VALUE)

    assert refused.status == 413
    error = refused.json()["error"]
    assert (error["code"], error["used_bytes"], error["needed_bytes"]) == ("storage_limit_exceeded", 2 * cost, cost)
    assert CairnStore(address).get(NS, "c") is None
    assert usage(api, address) == 2 * cost
    # A smaller replacement gives back the difference; a delete gives back the whole item.
    assert put(api, address, "a", {"text": "x" * 1_000}).status == 200
    assert usage(api, address) == 2 * cost - 2_000
    CairnStore(address).delete(NS, "b")
    assert usage(api, address) == cost - 2_000
    assert put(api, address, "c", VALUE).status == 200


def test_an_item_whose_ttl_passed_gives_its_room_to_a_put_that_needs_it(moto_env: None, clock: FakeClock):
    cost = cost_of_one(clock)
    api, address = on_moto(clock, 2 * cost + 500)
    cairn = CairnStore(address)
    cairn.put(NS, "a", VALUE, ttl=1)
    cairn.put(NS, "b", VALUE)
    with pytest.raises(StorageLimitExceeded):
        cairn.put(NS, "c", VALUE)

    clock.advance(61)
    cairn.put(NS, "c", VALUE)

    assert sorted(item.key for item in cairn.search(NS)) == ["b", "c"]
    assert usage(api, address) == 2 * cost
    # The key whose item ended is written again from nothing.
    with pytest.raises(StorageLimitExceeded):
        cairn.put(NS, "a", VALUE)
    cairn.delete(NS, "b")
    cairn.put(NS, "a", VALUE, ttl=1)
    assert sorted(item.key for item in cairn.search(NS)) == ["a", "c"]


def test_a_refreshed_ttl_keeps_an_item_and_its_room(moto_env: None, clock: FakeClock):
    cost = cost_of_one(clock)
    api, address = on_moto(clock, 2 * cost + 500)
    cairn = CairnStore(address)
    cairn.put(NS, "a", VALUE, ttl=1)
    cairn.put(NS, "b", VALUE)
    held = usage(api, address)
    clock.advance(50)
    assert cairn.get(NS, "a") is not None  # a refreshing read: a minute more from now
    clock.advance(50)

    with pytest.raises(StorageLimitExceeded):
        cairn.put(NS, "c", VALUE)
    assert cairn.get(NS, "a", refresh_ttl=False) is not None
    assert usage(api, address) == held
