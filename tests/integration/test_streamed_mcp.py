"""`POST /mcp` through the streaming bootstrap as Lambda starts it, on DynamoDB Local.

In AWS every call of `/mcp` runs in the streaming function (its `poll_events`
may wait up to 25 s, and a held read must never hold the API function): here
the exec wrapper's own process, with Lambda's environment and waiter, answers
the MCP messages a client sends, each body base64-encoded as API Gateway
hands it over, and a waiting poll takes one of the address's waiting-poll
slots, shared with the REST long-polls.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.dynamodb import keys
from tests.support.lambda_client import LambdaClient, make_services
from tests.support.runtime_api import FakeRuntimeApi, response_headers, streaming_function
from tests.unit.test_mcp_api import VERSION

WAITING_POLLS = 1


@pytest.fixture
def api(dynamodb_local, local_table: str, clock) -> LambdaClient:
    services = make_services(
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        clock=clock,
        max_waiting_polls_per_address=WAITING_POLLS,
    )
    return LambdaClient(services)


@pytest.fixture
def runtime_api() -> Iterator[FakeRuntimeApi]:
    with FakeRuntimeApi() as endpoint:
        yield endpoint


@pytest.fixture
def bootstrap(runtime_api: FakeRuntimeApi, dynamodb_local, local_table: str) -> Iterator[None]:
    with streaming_function(
        runtime_api,
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute="10000",
        max_waiting_polls_per_address=str(WAITING_POLLS),
    ):
        yield


class StreamedMcp:
    """An MCP client whose every message is one invocation of the streaming function."""

    def __init__(self, api: LambdaClient, runtime_api: FakeRuntimeApi) -> None:
        self._api = api
        self._runtime_api = runtime_api
        self._ids = iter(range(1, 1_000))

    def send(self, method: str, params: Any = None, *, notification: bool = False) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if not notification:
            message["id"] = next(self._ids)
        if params is not None:
            message["params"] = params
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
        }
        # Bytes: with every media type binary, API Gateway hands request bodies over base64-encoded.
        self._runtime_api.invoke(self._api.event("POST", "/mcp", body=json.dumps(message).encode(), headers=headers))

    def answer(self, timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
        prelude, body = self._runtime_api.next_post(timeout=timeout).streamed()
        return prelude["statusCode"], response_headers(prelude), body

    def result(self, method: str, params: Any = None) -> dict[str, Any]:
        self.send(method, params)
        status, headers, body = self.answer()
        assert (status, headers["Content-Type"]) == (200, "application/json"), body
        return json.loads(body)["result"]

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = self.result("tools/call", {"name": name, "arguments": arguments})
        assert result["isError"] is False, result
        return result["structuredContent"]


def held_waits(api: LambdaClient, address_id: str) -> int:
    head = api.services.client.get_item(
        TableName=api.services.settings.table_name,
        Key={"pk": {"S": keys.address_pk(address_id)}, "sk": {"S": keys.META}},
        ConsistentRead=True,
    )["Item"]
    return len(head.get("held_waits", {}).get("M", {}))


def test_the_mcp_endpoint_answers_behind_the_streaming_loop_and_a_waiting_poll_holds_a_slot(
    api, runtime_api, bootstrap
):
    mcp = StreamedMcp(api, runtime_api)
    offer = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    initialized = mcp.result("initialize", offer)
    assert (initialized["protocolVersion"], initialized["serverInfo"]["name"]) == (VERSION, "cairn")
    mcp.send("notifications/initialized", notification=True)
    assert mcp.answer()[::2] == (202, b"")

    created = mcp.tool("create_return_address", task_id="streamed")
    address = {"address_id": created["address"]["id"], "read_token": created["credentials"]["read_token"]}
    written = mcp.tool("set_state", **address, key="plan", value={"step": 1}, if_revision=0)
    assert written["revision"] == 1

    mcp.send("tools/call", {"name": "poll_events", "arguments": {**address, "after": 1, "wait": 20}})
    deadline = time.monotonic() + 30
    while held_waits(api, address["address_id"]) < WAITING_POLLS and time.monotonic() < deadline:
        time.sleep(0.05)
    # The MCP poll holds the address's one waiting-poll slot: a REST long-poll is refused before it waits.
    refused = api.poll(created, after=1, wait=5)
    assert (refused.status, refused.error_code) == (429, "too_many_held_reads")
    assert int(refused.headers["Retry-After"]) >= 1

    threading.Timer(0.5, api.post_inbox, args=(created, {"type": "job.done"})).start()
    started = time.monotonic()
    status, _, body = mcp.answer()
    assert status == 200
    page = json.loads(body)["result"]["structuredContent"]
    assert [(event["sequence"], event["type"]) for event in page["events"]] == [(2, "job.done")]
    assert time.monotonic() - started < 15, "the poll returned when the event arrived, not at the end of its wait"
    assert held_waits(api, address["address_id"]) == 0, "the returned poll gave its slot back"
