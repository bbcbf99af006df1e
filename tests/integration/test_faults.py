"""Storage faults at every DynamoDB call of every mutating operation.

A botocore hook on the service's own client fails the Nth call of one
request, for every N, with each kind of failure AWS can hand back. Hooks
raise outside botocore's own retry loop, so every fault reaches Cairn's code
whatever the client's retry settings. After each fault the answer is a
success or a 503 with `Retry-After`, state and feed agree, and retrying the
same request leaves exactly one result.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from cairn.client import Address, HttpClient, RetryPolicy
from cairn.runtime.dynamo import DynamoRuntimeStore
from cairn.runtime.errors import RuntimeStoreUnavailable
from cairn.runtime.http import HttpRuntimeStore
from cairn.runtime.model import RunStatus
from cairn.services import Services
from cairn.settings import Settings
from cairn.store.client import make_client
from cairn.store.table import ensure_table
from cairn.store.waiters import NotifyingWaiter

from tests.contract.builders import T0, note, root_start, run_start, terminal
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply, path_of

FAULTS = ("throttling", "provisioned_throughput", "transaction_conflict", "network", "timeout_after_commit")


def injected_error(kind: str, operation: str, request: dict[str, Any]) -> Exception:
    """The exception DynamoDB (or the network) would raise for this serialized request."""
    if kind == "network":
        return EndpointConnectionError(endpoint_url="http://dynamodb.invalid")
    if kind == "transaction_conflict" and operation == "TransactWriteItems":
        # A real conflict names the one contended item; the others say None.
        reasons = [{"Code": "None"} for _ in json.loads(request["body"])["TransactItems"]]
        reasons[-1] = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
        return client_error("TransactionCanceledException", operation, CancellationReasons=reasons)
    code = {
        "throttling": "ThrottlingException",
        "provisioned_throughput": "ProvisionedThroughputExceededException",
        "transaction_conflict": "TransactionConflictException",
    }[kind]
    return client_error(code, operation)


def client_error(code: str, operation: str, **extra: Any) -> ClientError:
    response = {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": 400}, **extra}
    return ClientError(response, operation)


class FaultInjector:
    """Counts the DynamoDB calls of one client and fails the Nth, once.

    `timeout_after_commit` lets the real call succeed and then loses its
    answer, the way a read timeout does after DynamoDB has applied a write.
    """

    def __init__(self, client) -> None:
        self.calls = 0
        self.fired = False
        self._kind: str | None = None
        self._at = 0
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def arm(self, kind: str | None = None, at: int = 0) -> None:
        """Start counting from zero; with a kind, fail call number `at`."""
        self.calls = 0
        self.fired = False
        self._kind = kind
        self._at = at

    def disarm(self) -> None:
        self._kind = None

    def _before(self, model, params, **_: Any) -> None:
        self.calls += 1
        if self._kind is None or self._kind == "timeout_after_commit" or self.calls != self._at:
            return
        self.fired = True
        raise injected_error(self._kind, model.name, params)

    def _after(self, http_response, **_: Any) -> None:
        if self._kind != "timeout_after_commit" or self.calls != self._at or http_response.status_code >= 300:
            return
        self.fired = True
        raise ReadTimeoutError(endpoint_url="http://dynamodb.invalid")


@pytest.fixture(scope="module")
def faulty(dynamodb_local) -> tuple[LambdaClient, FaultInjector]:
    """The API resolver on DynamoDB Local whose one client carries the injector.

    One table for the module: every case works on addresses and runs of its own.
    """
    table = f"cairn-faults-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute=10_000,
        create_rate_per_minute=10_000,
        runtime_key="fault-key",
    )
    client = make_client(settings)
    ensure_table(client, table)
    injector = FaultInjector(client)
    services = Services.build(settings, client=client, waiter=NotifyingWaiter(), clock=FakeClock())
    return LambdaClient(services), injector


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


OPERATIONS = {
    "provision": Operation(provisioned, send_provision, verify_provision),
    "inbox_post": Operation(provisioned, send_delivery, verify_delivery),
    "ack": Operation(with_event, send_ack, verify_ack),
    "state_put": Operation(with_counter, send_state_put, verify_state_put),
    "state_delete": Operation(with_counter, send_state_delete, verify_state_delete),
    "state_batch": Operation(with_counter, send_state_batch, verify_state_batch),
    "address_delete": Operation(with_everything, send_address_delete, verify_address_delete),
}


def assert_success_or_retryable(reply: Reply) -> None:
    if reply.status < 300:
        return
    assert reply.status == 503, reply.text
    assert reply.error_code == "temporarily_unavailable"
    assert reply.headers.get("Retry-After") == "1"


def calls_made(injector: FaultInjector, action: Callable[[], Any]) -> int:
    injector.arm()
    action()
    return injector.calls


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
        if name not in ("provision", "address_delete"):
            assert_state_matches_feed(api, created)


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


# -- runtime store ------------------------------------------------------------------


@dataclass
class RuntimeCommand:
    """One runtime mutation, its preparation, and the event keys it records once."""

    prepare: Callable[[Any, Any], None]
    send: Callable[[Any, Any], Any]
    record_ids: Callable[[Any], list[str]]
    recorded_keys: list[str]


def prepare_session(store, run) -> None:
    store.create_session(run.session_id, T0)


def prepare_running(store, run) -> None:
    prepare_session(store, run)
    store.start_root_run(root_start(run))


RUNTIME_COMMANDS = {
    "start_root_run": RuntimeCommand(
        prepare_session,
        lambda store, run: store.start_root_run(root_start(run)),
        lambda result: [result.started.id],
        ["started"],
    ),
    "append_run_record": RuntimeCommand(
        prepare_running,
        lambda store, run: store.append_run_record(note(run, "note")),
        lambda result: [result.id],
        ["started", "note"],
    ),
    "record_run_terminal": RuntimeCommand(
        prepare_running,
        lambda store, run: store.record_run_terminal(terminal(run)),
        lambda result: [result.id],
        ["started", "terminal"],
    ),
}


@pytest.fixture
def runtime_over_http(faulty):
    """The runtime store through the service's routes; every answer is kept for inspection."""
    api, injector = faulty
    answers: list[httpx.Response] = []

    def handle(request: httpx.Request) -> httpx.Response:
        answers.append(api.handle(request))
        return answers[-1]

    store = HttpRuntimeStore("http://cairn.test", runtime_key="fault-key", transport=httpx.MockTransport(handle))
    yield store, injector, answers
    store.close()


@pytest.mark.parametrize("kind", FAULTS)
@pytest.mark.parametrize("name", RUNTIME_COMMANDS)
def test_a_runtime_fault_is_retryable_and_an_exact_retry_records_once(runtime_over_http, name: str, kind: str):
    store, injector, answers = runtime_over_http
    command = RUNTIME_COMMANDS[name]
    baseline = run_start(f"baseline-{name}-{kind}", session=f"baseline-{name}-{kind}")
    command.prepare(store, baseline)
    total = calls_made(injector, lambda: command.send(store, baseline))
    for at in range(1, total + 1):
        run = run_start(f"run-{name}-{kind}-{at}", session=f"session-{name}-{kind}-{at}")
        command.prepare(store, run)
        injector.arm(kind, at)
        try:
            first = command.send(store, run)
        except RuntimeStoreUnavailable:
            first = None
            answer = answers[-1]
            assert answer.status_code == 503 and answer.headers["Retry-After"] == "1", answer.text
            assert answer.json()["error"]["contract"] is False
        finally:
            injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        retry = command.send(store, run)
        if first is not None:
            assert command.record_ids(retry) == command.record_ids(first)
        keys = [record.event_key for record in store.list_run_records(run.run_id, "", 1000).events]
        assert Counter(keys) == Counter(command.recorded_keys)
        if name == "record_run_terminal":
            assert store.load_run(run.run_id).status == RunStatus.COMPLETED


def test_the_dynamo_runtime_store_raises_unavailable_unwrapped(dynamodb_local, local_table):
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    injector = FaultInjector(client)
    store = DynamoRuntimeStore(client, local_table)
    run = run_start()
    prepare_running(store, run)
    injector.arm("throttling", 1)
    with pytest.raises(RuntimeStoreUnavailable):
        store.append_run_record(note(run, "note"))
    injector.disarm()
    assert store.append_run_record(note(run, "note")).inserted
