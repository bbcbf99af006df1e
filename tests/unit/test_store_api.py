"""The LangGraph store route and `CairnStore` through the Lambda resolver, on moto: TTL, versions, limits, pieces."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cairn.client import Address, HttpClient
from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.client import make_client
from cairn.graphstore import batches
from cairn.integrations.langgraph import CairnStore, StoreVersionConflict, store
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient

NS = ("users", "u1")


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def address(api: LambdaClient) -> Address:
    return Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


@pytest.fixture
def cairn(address: Address) -> CairnStore:
    return CairnStore(address)


def send(api: LambdaClient, address: Address, *ops: dict[str, Any], token: str | None = None):
    url = f"/api/v1/addresses/{address.id}/store/batch"
    return api.request("POST", url, json_body={"ops": list(ops)}, token=token or address.read_token)


def everything(cairn: CairnStore) -> list[tuple[tuple[str, ...], str, dict]]:
    return sorted((item.namespace, item.key, item.value) for item in cairn.search((), limit=1000))


def test_the_store_sends_within_the_servers_limits():
    assert store.MAX_OPS == batches.MAX_OPS


def test_an_item_put_is_read_back_with_its_times_and_a_put_again_keeps_created_at(cairn: CairnStore, clock: FakeClock):
    cairn.put(NS, "prefs", {"theme": "dark"})
    first = cairn.get(NS, "prefs")
    clock.advance(5)
    cairn.put(NS, "prefs", {"theme": "light"})
    second = cairn.get(NS, "prefs")

    assert first is not None and second is not None
    assert (second.namespace, second.key, second.value) == (NS, "prefs", {"theme": "light"})
    assert second.created_at == first.created_at
    assert (second.updated_at - first.updated_at).total_seconds() == pytest.approx(5, abs=0.01)
    cairn.delete(NS, "prefs")
    assert cairn.get(NS, "prefs") is None


def test_an_item_with_a_ttl_is_gone_once_it_passes_to_every_read(cairn: CairnStore, clock: FakeClock):
    cairn.put(NS, "short", {"n": 1}, ttl=1)
    cairn.put(NS, "long", {"n": 2})
    clock.advance(59)
    assert cairn.get(NS, "short", refresh_ttl=False) is not None

    clock.advance(2)

    assert cairn.get(NS, "short") is None
    assert [item.key for item in cairn.search(NS)] == ["long"]
    cairn.delete(NS, "long")
    assert cairn.list_namespaces() == []


def test_a_refreshing_read_moves_the_ttl_on_and_one_that_does_not_leaves_it(cairn: CairnStore, clock: FakeClock):
    cairn.put(NS, "kept", {"n": 1}, ttl=1)
    cairn.put(NS, "searched", {"n": 2}, ttl=1)
    for _ in range(3):
        clock.advance(50)
        assert cairn.get(NS, "kept") is not None
        assert [item.key for item in cairn.search(NS, filter={"n": 2})] == ["searched"]

    clock.advance(50)
    assert cairn.get(NS, "kept", refresh_ttl=False) is not None
    clock.advance(11)
    assert cairn.get(NS, "kept") is None
    assert cairn.search(NS, refresh_ttl=False) == []


def test_orderings_compare_integers_past_a_floats_range_exactly(cairn: CairnStore):
    huge = 10**400
    for key, n in {"small": 5, "huge": huge, "huger": huge + 1, "fraction": 1.5}.items():
        cairn.put(NS, key, {"n": n})

    def found(condition: dict[str, Any]) -> list[str]:
        return sorted(item.key for item in cairn.search(NS, filter={"n": condition}))

    assert found({"$gt": huge}) == ["huger"]
    assert found({"$gte": 10**399}) == ["huge", "huger"]
    assert found({"$lt": huge}) == ["fraction", "small"]
    assert found({"$lte": 1.5}) == ["fraction"]
    assert found({"$gt": 1e308}) == ["huge", "huger"]


def test_an_expected_version_put_commits_only_on_the_version_read(cairn: CairnStore):
    assert cairn.get_versioned(NS, "plan") == (None, 0)
    assert cairn.put_if_version(NS, "plan", {"step": 1}, expected_version=0) == 1
    with pytest.raises(StoreVersionConflict) as refused:
        cairn.put_if_version(NS, "plan", {"step": "stale"}, expected_version=0)
    assert (refused.value.status, refused.value.current_version) == (409, 1)

    item, version = cairn.get_versioned(NS, "plan")
    assert item is not None and (item.value, version) == ({"step": 1}, 1)
    assert cairn.put_if_version(NS, "plan", {"step": 2}, expected_version=1) == 2
    cairn.put(NS, "plan", {"step": 3})  # a plain put is last-writer-wins, and counts as a version too
    with pytest.raises(StoreVersionConflict):
        cairn.put_if_version(NS, "plan", None, expected_version=2)
    assert cairn.put_if_version(NS, "plan", None, expected_version=3) == 0
    assert cairn.get_versioned(NS, "plan") == (None, 0)


def test_an_expired_item_counts_as_absent_to_an_expected_version(cairn: CairnStore, clock: FakeClock):
    cairn.put(NS, "lease", {"holder": "a"}, ttl=1)
    clock.advance(61)
    # Absent to the writer, and the next item's version goes on from the expired one's.
    assert cairn.put_if_version(NS, "lease", {"holder": "b"}, expected_version=0) == 2


def test_reads_see_the_store_before_the_batchs_puts_and_the_later_put_wins(api: LambdaClient, address: Address):
    put = {"op": "put", "namespace": ["a"], "key": "k"}
    reply = send(
        api,
        address,
        {**put, "value": {"n": 1}},
        {"op": "get", "namespace": ["a"], "key": "k"},
        {**put, "value": {"n": 2}},
    )

    assert reply.status == 200, reply.text
    assert reply.json()["results"] == [
        {"op": "put", "version": 1},
        {"op": "get", "item": None},
        {"op": "put", "version": 1},
    ]
    assert CairnStore(address).get(("a",), "k").value == {"n": 2}


def test_an_expected_version_put_travels_alone(api: LambdaClient, address: Address):
    reply = send(
        api,
        address,
        {"op": "put", "namespace": ["a"], "key": "k", "value": {"n": 1}, "expected_version": 0},
        {"op": "put", "namespace": ["a"], "key": "j", "value": {"n": 1}},
    )

    assert (reply.status, reply.error_code) == (400, "invalid_request")
    assert everything(CairnStore(address)) == []


@pytest.mark.parametrize(
    ("op", "status", "code"),
    [
        ({"op": "search", "filter": {"n": {"$regex": "x"}}}, 400, "invalid_request"),
        ({"op": "search", "filter": {"n": {"$gt": 0, "x": 1}}}, 400, "invalid_request"),
        ({"op": "scan"}, 422, "invalid_request"),
        ({"op": "put", "namespace": [], "key": "k", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": [""], "key": "k", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"] * 17, "key": "k", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"], "key": "k\x00", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": [1]}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": {}, "ttl": 0}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": {}, "ttl": 5e-324}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": {}, "expected_version": -1}, 422, "invalid_request"),
        ({"op": "get", "namespace": ["a"], "key": "k", "surprise": 1}, 422, "invalid_request"),
        ({"op": "search", "limit": 10_000}, 422, "invalid_request"),
        ({"op": "list_namespaces", "max_depth": 0}, 422, "invalid_request"),
    ],
)
def test_hostile_ops_are_refused_and_the_batch_stores_nothing(
    api: LambdaClient, address: Address, op: dict, status: int, code: str
):
    reply = send(api, address, {"op": "put", "namespace": ["kept"], "key": "k", "value": {"n": 1}}, op)

    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert everything(CairnStore(address)) == []


def test_a_batch_without_the_read_token_is_refused_and_stores_nothing(api: LambdaClient, address: Address):
    reply = send(api, address, {"op": "put", "namespace": ["a"], "key": "k", "value": {}}, token="wrong")

    assert (reply.status, reply.error_code) == (401, "unauthorized")
    assert everything(CairnStore(address)) == []


def test_a_large_value_is_stored_in_pieces_and_a_smaller_one_leaves_none_behind(
    api: LambdaClient, address: Address, cairn: CairnStore
):
    big = {"text": "x" * 900_000}
    cairn.put(NS, "doc", big)
    assert cairn.get(NS, "doc").value == big
    assert len(pieces(api, address)) == 3

    cairn.put(NS, "doc", {"text": "y" * 400_000})
    assert len(pieces(api, address)) == 2
    cairn.put(NS, "doc", {"text": "short"})
    assert pieces(api, address) == []
    cairn.put(NS, "doc", big)
    cairn.delete(NS, "doc")
    assert pieces(api, address) == []
    assert cairn.get(NS, "doc") is None


def pieces(api: LambdaClient, address: Address) -> list[str]:
    client = make_client(api.services.settings)
    found = table_ops.query_prefix(
        client, api.services.settings.table_name, keys.address_pk(address.id), f"C#{keys.STORE_PREFIX}"
    )
    return [item["sk"]["S"] for item in found]


def test_deleting_the_address_deletes_its_store_items(api: LambdaClient, address: Address, cairn: CairnStore):
    cairn.put(NS, "doc", {"text": "x" * 500_000})
    cairn.put(("other",), "k", {"n": 1})

    reply = api.request("DELETE", f"/api/v1/addresses/{address.id}", token=address.read_token)

    assert reply.status in (200, 204), reply.text
    client = make_client(api.services.settings)
    left = table_ops.query_range(client, api.services.settings.table_name, keys.address_pk(address.id))
    assert list(left) == []


def test_a_search_whose_items_do_not_fit_one_answer_is_refused_and_a_smaller_page_is_answered(
    api: LambdaClient, address: Address, cairn: CairnStore
):
    for key in "abcde":
        cairn.put(NS, key, {"text": key * 900_000})

    reply = send(api, address, {"op": "search", "namespace_prefix": list(NS), "limit": 10})

    assert (reply.status, reply.error_code) == (413, "payload_too_large")
    assert len(cairn.search(NS, limit=4)) == 4


def test_what_a_batch_reads_is_bounded_whatever_its_searches_keep(
    monkeypatch: pytest.MonkeyPatch, api: LambdaClient, address: Address, cairn: CairnStore
):
    """A filter matching nothing, or an offset past the end, reads everything it passes: a hundred such searches
    in one batch had read a full address a hundred times."""
    monkeypatch.setattr(batches, "MAX_SCANNED_ITEMS", 50)
    cairn.batch([store.PutOp(NS, f"k{n}", {"n": n}) for n in range(30)])
    nothing = {"op": "search", "namespace_prefix": list(NS), "filter": {"n": -1}, "limit": 1}
    past = {"op": "search", "namespace_prefix": list(NS), "offset": 1_000, "limit": 1}
    names = {"op": "list_namespaces", "offset": 1_000, "limit": 1}
    for ops in ([nothing], [past], [names], [nothing, {**nothing, "namespace_prefix": ["other"]}]):
        assert send(api, address, *ops).status == 200, ops
    for ops in ([nothing, nothing], [nothing, past], [past, names, names]):
        refused = send(api, address, *ops)
        assert (refused.status, refused.error_code) == (413, "payload_too_large"), ops
        assert refused.json()["error"]["max_scanned_items"] == 50


@pytest.mark.parametrize("text", ['"' * 499_700, "界" * 333_000], ids=["quotes", "cjk"])
def test_reads_of_items_that_escape_large_answer_within_lambdas_limit_or_are_refused(
    api: LambdaClient, address: Address, cairn: CairnStore, text: str
):
    """Each value is under 1 MB as JSON and twice that or more as Lambda writes it: four once made an 8 MB answer."""
    for key in "abcd":
        cairn.put(NS, key, {"a": text})
    url = f"/api/v1/addresses/{address.id}/store/batch"
    gets = [{"op": "get", "namespace": list(NS), "key": key} for key in "abcd"]
    for ops in ([{"op": "search", "namespace_prefix": list(NS), "limit": 10}], gets):
        reply, size = api.sent("POST", url, json_body={"ops": ops}, token=address.read_token)
        assert (reply.status, reply.error_code) == (413, "payload_too_large") and size < LAMBDA_ANSWER_LIMIT
    reply, size = api.sent("POST", url, json_body={"ops": gets[:1]}, token=address.read_token)
    assert reply.status == 200 and reply.json()["results"][0]["item"]["value"] == {"a": text}


def test_namespaces_that_escape_large_answer_within_lambdas_limit_or_are_refused(api: LambdaClient, address: Address):
    """120 namespaces of 16 labels of 256 emoji (each 14 bytes as Lambda writes it): 6.9 MB when nothing counted them."""
    labels = ["\N{GRINNING FACE}" * 256] * 15
    puts = [{"op": "put", "namespace": [f"{n:03}", *labels], "key": "k", "value": {}} for n in range(120)]
    assert send(api, address, *puts[:100]).status == 200 and send(api, address, *puts[100:]).status == 200
    url = f"/api/v1/addresses/{address.id}/store/batch"
    everything = {"ops": [{"op": "list_namespaces", "limit": 1000}]}
    reply, size = api.sent("POST", url, json_body=everything, token=address.read_token)
    assert (reply.status, reply.error_code) == (413, "payload_too_large") and size < LAMBDA_ANSWER_LIMIT
    fewer = {"ops": [{"op": "list_namespaces", "limit": 50}]}
    reply, size = api.sent("POST", url, json_body=fewer, token=address.read_token)
    assert reply.status == 200 and len(reply.json()["results"][0]["namespaces"]) == 50
