"""Storage faults at every DynamoDB call of every address operation.

A botocore hook on the service's own client fails the Nth call of one
request, for every N, with each kind of failure AWS can hand back (see
`tests.support.faults`). After each fault the answer is a success or a 503
with `Retry-After`, state and feed agree, and retrying the same request
leaves exactly one result. The runtime store's commands and inbound email
get the same treatment in `test_runtime_faults.py` and `test_email_faults.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from cairn.client import Address, HttpClient, RetryPolicy
from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.client import make_client
from tests.support.faults import BUSY_CODES, FAULTS, FaultInjector, assert_success_or_retryable, calls_made, faulty_api
from tests.support.lambda_client import LambdaClient, Reply, path_of


@pytest.fixture(scope="module")
def faulty(dynamodb_local) -> tuple[LambdaClient, FaultInjector]:
    """One table for the module: every case works on addresses of its own."""
    return faulty_api(dynamodb_local.endpoint)


# -- address operations -----------------------------------------------------------


def token(created: dict) -> str:
    return created["credentials"]["read_token"]


def state_path(created: dict, key: str = "") -> str:
    root = path_of(created["endpoints"]["state_url"])
    return f"{root}/{key}" if key else root


def put_state(api: LambdaClient, created: dict, key: str, value: Any, revision: int) -> Reply:
    body = {"value": value, "if_revision": revision}
    return api.request("PUT", state_path(created, key), json_body=body, token=token(created))


def all_events(api: LambdaClient, created: dict) -> list[dict]:
    reply = api.poll(created, limit=1000)
    assert reply.status == 200, reply.text
    return reply.json()["events"]


def state_keys(api: LambdaClient, created: dict) -> dict[str, dict]:
    reply = api.request("GET", state_path(created), token=token(created))
    assert reply.status == 200, reply.text
    return {entry["key"]: entry for entry in reply.json()["keys"]}


def assert_state_matches_feed(api: LambdaClient, created: dict) -> None:
    """Every state revision has exactly one `state.updated` event, and no event lacks its revision."""
    events = all_events(api, created)
    assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
    history: dict[str, list[dict]] = {}
    for event in events:
        if event["type"] == "state.updated":
            history.setdefault(event["data"]["key"], []).append(event["data"])
    live = state_keys(api, created)
    for key, changes in history.items():
        assert [change["revision"] for change in changes] == list(range(1, len(changes) + 1)), key
        if changes[-1]["op"] == "set":
            assert live[key]["revision"] == changes[-1]["revision"], key
        else:
            assert key not in live
    assert set(live) <= set(history)


@dataclass
class Operation:
    """One mutating request: its preparation, the request, and what must hold after a retry."""

    prepare: Callable[[LambdaClient], dict]
    send: Callable[[LambdaClient, dict], Reply]
    verify: Callable[[LambdaClient, dict, Reply, Reply], None]


def provisioned(api: LambdaClient) -> dict:
    return api.provision()


def with_counter(api: LambdaClient) -> dict:
    created = api.provision()
    assert put_state(api, created, "counter", 1, 0).status == 201
    return created


def with_event(api: LambdaClient) -> dict:
    created = api.provision()
    reply = api.post_inbox(created, {"n": 0})
    assert reply.status == 202
    return {**created, "event_id": reply.json()["event"]["id"]}


def with_everything(api: LambdaClient) -> dict:
    created = with_counter(api)
    for n in range(3):
        assert api.post_inbox(created, {"n": n}, key=f"k{n}").status == 202
    return created


def send_provision(api: LambdaClient, _: dict) -> Reply:
    return api.request("POST", "/api/v1/addresses", json_body={})


def verify_provision(api: LambdaClient, _: dict, first: Reply, retry: Reply) -> None:
    # Provisioning has no idempotency key: a lost answer costs an unused address, never a broken one.
    for reply in (first, retry):
        if reply.status == 201:
            assert all_events(api, reply.json()) == []


def send_delivery(api: LambdaClient, created: dict) -> Reply:
    return api.post_inbox(created, {"type": "job.done", "data": {"job": 7}}, key="job-7")


def verify_delivery(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status in (200, 202), retry.text
    delivered = [event for event in all_events(api, created) if event["type"] == "job.done"]
    assert [event["id"] for event in delivered] == [retry.json()["event"]["id"]]
    if first.status == 202:
        assert retry.json() == {"duplicate": True, "event": first.json()["event"]}


def send_ack(api: LambdaClient, created: dict) -> Reply:
    path = f"{path_of(created['endpoints']['events_url'])}/{created['event_id']}/ack"
    return api.request("POST", path, token=token(created))


def verify_ack(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status == 200, retry.text
    if first.status == 200:
        assert retry.json() == first.json()
    [event] = all_events(api, created)
    assert event["acknowledged_at"] is not None


def send_state_put(api: LambdaClient, created: dict) -> Reply:
    return put_state(api, created, "counter", 2, 1)


def verify_state_put(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # A compare-and-set whose answer was lost conflicts with its own write on retry.
    assert retry.status == 200 or (retry.status == 409 and retry.json()["error"]["current_revision"] == 2), retry.text
    assert state_keys(api, created)["counter"]["revision"] == 2


def send_state_delete(api: LambdaClient, created: dict) -> Reply:
    return api.request("DELETE", state_path(created, "counter"), token=token(created))


def verify_state_delete(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status in (200, 404), retry.text
    assert "counter" not in state_keys(api, created)
    deletions = [event for event in all_events(api, created) if event["data"].get("op") == "delete"]
    assert len(deletions) == 1


def send_state_batch(api: LambdaClient, created: dict) -> Reply:
    operations = [
        {"key": "counter", "op": "set", "value": 2, "if_revision": 1},
        {"key": "label", "op": "set", "value": "two", "if_revision": 0},
    ]
    return api.request("POST", state_path(created), json_body={"operations": operations}, token=token(created))


def verify_state_batch(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status in (200, 409), retry.text
    keys = state_keys(api, created)
    assert (keys["counter"]["revision"], keys["label"]["revision"]) == (2, 1)


def send_address_delete(api: LambdaClient, created: dict) -> Reply:
    return api.request("DELETE", path_of(created["endpoints"]["address_url"]), token=token(created))


def verify_address_delete(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # The owner's retry finishes a sweep a fault cut short; once the sweep is
    # complete (even if its answer was lost) the address is gone and refuses.
    assert retry.status in (200, 401), retry.text
    assert api.poll(created).status == 401
    remaining = make_client(api.services.settings).query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"A#{created['address']['id']}"}},
        ConsistentRead=True,
    )["Items"]
    assert remaining == []


def with_three_events(api: LambdaClient) -> dict:
    created = api.provision()
    for n in range(3):
        assert api.post_inbox(created, {"n": n}).status == 202
    return created


def send_trim(api: LambdaClient, created: dict) -> Reply:
    url = path_of(created["endpoints"]["events_url"]) + "?through=2&include_unacknowledged=true"
    return api.request("DELETE", url, token=token(created))


def verify_trim(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # The retry finishes a trim a fault cut short: nothing at or below the mark is left behind.
    assert retry.status == 200, retry.text
    assert retry.json()["trimmed_through"] == 2
    page = api.poll(created).json()
    assert ([event["sequence"] for event in page["events"]], page["trimmed_through"]) == ([3], 2)
    remaining = make_client(api.services.settings).query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": f"A#{created['address']['id']}"}, ":events": {"S": "E#"}},
        ConsistentRead=True,
    )["Items"]
    assert [item["sk"]["S"] for item in remaining] == ["E#000000000003"]


def subscriptions_path(created: dict) -> str:
    return f"{path_of(created['endpoints']['address_url'])}/subscriptions"


def listed_subscriptions(api: LambdaClient, created: dict) -> list[dict]:
    reply = api.request("GET", subscriptions_path(created), token=token(created))
    assert reply.status == 200, reply.text
    return reply.json()["subscriptions"]


def counted_subscriptions(api: LambdaClient, created: dict) -> int:
    """The counter the limit is checked against; it must equal what is listed."""
    item = (
        make_client(api.services.settings)
        .get_item(
            TableName=api.services.settings.table_name,
            Key={"pk": {"S": f"A#{created['address']['id']}"}, "sk": {"S": "WCOUNT"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return int(item["n"]["N"]) if item else 0


def with_subscription(api: LambdaClient) -> dict:
    created = api.provision()
    reply = send_subscription_create(api, created)
    assert reply.status == 201, reply.text
    return {**created, "subscription_id": reply.json()["subscription"]["id"]}


def send_subscription_create(api: LambdaClient, created: dict) -> Reply:
    body = {"target": {"kind": "webhook", "url": "https://hooks.invalid/cairn"}}
    return api.request("POST", subscriptions_path(created), json_body=body, token=token(created))


def verify_subscription_create(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # No idempotency key: a lost answer costs a second subscription, never a miscounted one.
    assert retry.status == 201, retry.text
    listed = listed_subscriptions(api, created)
    # Two when the first one landed, whether or not its answer did.
    assert len(listed) in ((2,) if first.status == 201 else (1, 2))
    assert counted_subscriptions(api, created) == len(listed)


def send_subscription_delete(api: LambdaClient, created: dict) -> Reply:
    path = f"{subscriptions_path(created)}/{created['subscription_id']}"
    return api.request("DELETE", path, token=token(created))


def verify_subscription_delete(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status in (200, 404), retry.text
    if retry.status == 404:
        assert retry.json()["error"]["code"] == "subscription_not_found"
    assert listed_subscriptions(api, created) == []
    assert counted_subscriptions(api, created) == 0


def session_items_path(created: dict) -> str:
    return f"/api/v1/addresses/{created['address']['id']}/sessions/faults/items"


SESSION_ITEMS = [{"role": "user", "content": "once"}, {"role": "assistant", "content": "only once"}]


def send_session_add(api: LambdaClient, created: dict) -> Reply:
    body = {"items": SESSION_ITEMS, "add_id": "fault-add"}
    return api.request("POST", session_items_path(created), json_body=body, token=token(created))


def verify_session_add(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status == 201, retry.text
    assert retry.json()["count"] == len(SESSION_ITEMS)
    stored = api.request("GET", session_items_path(created), token=token(created))
    assert stored.json()["items"] == SESSION_ITEMS  # whole, and once


SUMMARY = [{"type": "compaction", "encrypted_content": "once"}]


def with_session(api: LambdaClient) -> dict:
    created = api.provision()
    added = api.request("POST", session_items_path(created), json_body={"items": SESSION_ITEMS}, token=token(created))
    assert added.status == 201, added.text
    return created


def send_session_replace(api: LambdaClient, created: dict) -> Reply:
    # The newest item, under the version the add left (1), as the OpenAI Agents SDK's compaction sends it.
    body = {"items": SUMMARY, "newest": 1, "version": 1, "replace_id": "fault-replace"}
    return api.request("POST", session_items_path(created) + "/replace", json_body=body, token=token(created))


def verify_session_replace(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # A retry of a replacement that committed is answered as made, not refused for the version it moved.
    assert retry.status == 200, retry.text
    assert retry.json()["count"] == len(SESSION_ITEMS)
    stored = api.request("GET", session_items_path(created), token=token(created))
    assert stored.json()["items"] == [SESSION_ITEMS[0], *SUMMARY]  # made, and once


# More rows than one transaction holds: written to a stage in two commits after its opening, then made the
# session by a fourth.
LONG_SUMMARY = [*({"role": "user", "content": f"said {index}"} for index in range(150)), *SUMMARY]


def send_session_replace_staged(api: LambdaClient, created: dict) -> Reply:
    body = {"items": LONG_SUMMARY, "version": 1, "replace_id": "fault-replace-staged"}
    return api.request("POST", session_items_path(created) + "/replace", json_body=body, token=token(created))


def verify_session_replace_staged(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status == 200, retry.text
    assert retry.json()["count"] == len(LONG_SUMMARY)
    stored = api.request("GET", session_items_path(created), token=token(created))
    assert stored.json()["items"] == LONG_SUMMARY  # made, and once
    # Nothing else is left of the session: its head, the items and the replacement's claim.
    pk = keys.address_pk(created["address"]["id"])
    rows = table_ops.query_range(api.services.client, api.services.settings.table_name, pk, ProjectionExpression="sk")
    assert sum("AGS#" in row["sk"]["S"] for row in rows) == 1 + len(LONG_SUMMARY) + 1


LONG_TURN = [{"role": "tool", "content": f"output {index}"} for index in range(150)]


def send_session_add_staged(api: LambdaClient, created: dict) -> Reply:
    body = {"items": LONG_TURN, "add_id": "fault-add-staged"}
    return api.request("POST", session_items_path(created), json_body=body, token=token(created))


def verify_session_add_staged(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    assert retry.status == 201, retry.text
    assert retry.json()["count"] == len(SESSION_ITEMS) + len(LONG_TURN)
    stored = api.request("GET", session_items_path(created), token=token(created))
    assert stored.json()["items"] == [*SESSION_ITEMS, *LONG_TURN]  # whole, after the items before, and once
    # Nothing else is left of the session: its head, the items and the add's claim.
    pk = keys.address_pk(created["address"]["id"])
    rows = table_ops.query_range(api.services.client, api.services.settings.table_name, pk, ProjectionExpression="sk")
    assert sum("AGS#" in row["sk"]["S"] for row in rows) == 1 + len(SESSION_ITEMS) + len(LONG_TURN) + 1


def send_session_add_parts(api: LambdaClient, created: dict) -> Reply:
    """An add larger than one request holds, as `CairnSession` sends it: its parts under one add_id, in order."""
    reply = None
    for offset, more in ((0, True), (100, False)):
        body = {"items": LONG_TURN[offset : offset + 100], "add_id": "fault-add-parts", "offset": offset, "more": more}
        reply = api.request("POST", session_items_path(created), json_body=body, token=token(created))
        if reply.status != 201:
            return reply
    assert reply is not None
    return reply


def strands_path(created: dict) -> str:
    return f"/api/v1/addresses/{created['address']['id']}/strands/faults/agents/default"


STRANDS_MESSAGE = {"message_id": 0, "message": {"role": "user", "content": [{"text": "once"}]}}


def with_strands_agent(api: LambdaClient) -> dict:
    created = api.provision()
    reply = api.request(
        "POST", strands_path(created), json_body={"value": {"agent_id": "default"}}, token=token(created)
    )
    assert reply.status == 201, reply.text
    return created


def send_strands_message(api: LambdaClient, created: dict) -> Reply:
    body = {"message": STRANDS_MESSAGE, "if_version": 1, "writer": "fault-run"}
    return api.request("POST", f"{strands_path(created)}/messages", json_body=body, token=token(created))


def verify_strands_message(api: LambdaClient, created: dict, first: Reply, retry: Reply) -> None:
    # The run's retry of a write that committed is answered as it was, not refused as another run's.
    assert retry.status == 201, retry.text
    assert retry.json()["version"] == 2
    stored = api.request("GET", f"{strands_path(created)}/messages", token=token(created))
    assert stored.json()["messages"] == [STRANDS_MESSAGE]  # whole, and once


OPERATIONS = {
    "provision": Operation(provisioned, send_provision, verify_provision),
    "inbox_post": Operation(provisioned, send_delivery, verify_delivery),
    "ack": Operation(with_event, send_ack, verify_ack),
    "state_put": Operation(with_counter, send_state_put, verify_state_put),
    "state_delete": Operation(with_counter, send_state_delete, verify_state_delete),
    "state_batch": Operation(with_counter, send_state_batch, verify_state_batch),
    "address_delete": Operation(with_everything, send_address_delete, verify_address_delete),
    "trim": Operation(with_three_events, send_trim, verify_trim),
    "subscription_create": Operation(provisioned, send_subscription_create, verify_subscription_create),
    "subscription_delete": Operation(with_subscription, send_subscription_delete, verify_subscription_delete),
    "session_add": Operation(provisioned, send_session_add, verify_session_add),
    "session_replace": Operation(with_session, send_session_replace, verify_session_replace),
    "session_replace_staged": Operation(with_session, send_session_replace_staged, verify_session_replace_staged),
    "session_add_staged": Operation(with_session, send_session_add_staged, verify_session_add_staged),
    "session_add_parts": Operation(with_session, send_session_add_parts, verify_session_add_staged),
    "strands_message": Operation(with_strands_agent, send_strands_message, verify_strands_message),
}


@pytest.mark.parametrize("kind", FAULTS)
@pytest.mark.parametrize("name", OPERATIONS)
def test_a_fault_at_any_call_leaves_a_retryable_answer_and_one_result(faulty, name: str, kind: str):
    api, injector = faulty
    operation = OPERATIONS[name]
    baseline = operation.prepare(api)
    total = calls_made(injector, lambda: operation.send(api, baseline))
    assert total >= 1
    for at in range(1, total + 1):
        created = operation.prepare(api)
        injector.arm(kind, at)
        first = operation.send(api, created)
        injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        assert_success_or_retryable(first)
        retry = operation.send(api, created)
        operation.verify(api, created, first, retry)
        if name not in ("provision", "address_delete", "trim"):
            assert_state_matches_feed(api, created)


@pytest.mark.parametrize("code", BUSY_CODES)
def test_every_busy_answer_from_dynamodb_is_a_retryable_503_that_changes_nothing(faulty, code: str):
    api, injector = faulty
    created = with_counter(api)
    injector.arm(code, 1)
    refused = send_state_put(api, created)
    injector.disarm()
    assert injector.fired
    assert refused.status == 503 and refused.error_code == "temporarily_unavailable", refused.text
    assert refused.headers["Retry-After"] == "1"
    assert state_keys(api, created)["counter"]["revision"] == 1
    assert_state_matches_feed(api, created)
    retry = send_state_put(api, created)
    verify_state_put(api, created, refused, retry)


def test_the_sdk_recovers_from_a_fault_through_its_retry(faulty):
    api, injector = faulty
    http = HttpClient(transport=httpx.MockTransport(api.handle), retry=RetryPolicy(base_delay=0.01))
    address = Address(api.provision(), http=http)
    # The first write commits and its answer is lost; the SDK retries the same key.
    injector.arm("timeout_after_commit", 1)
    delivery = address.inbox.post({"n": 1}, idempotency_key="once")
    assert injector.fired
    assert delivery["duplicate"] is True
    injector.arm("throttling", 1)
    assert address.state.set("counter", 1, if_revision=0)["revision"] == 1
    assert injector.fired
    events = address.events.poll()["events"]
    assert [event["type"] for event in events] == ["message.received", "state.updated"]
    http.close()
