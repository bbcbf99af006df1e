"""`POST /mcp` through the Lambda resolver: stateless JSON-RPC, its tools, REST-shaped answers."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from cairn import jsontext
from cairn.api.routes import events
from cairn.mcp import tools
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient, Reply, path_of

VERSION = "2025-11-25"
TOOL_NAMES = {
    "create_return_address",
    "poll_events",
    "acknowledge_event",
    "get_state",
    "set_state",
    "delete_state",
    "list_state",
    "list_contacts",
    "add_contact",
    "verify_contact",
    "send_email",
    "create_subscription",
    "list_subscriptions",
    "delete_subscription",
    "write_file",
    "read_file",
    "list_files",
    "delete_file",
}


def rpc(
    api: LambdaClient, method: str, params: Any = None, *, request_id: Any = 1, version: str | None = VERSION
) -> Reply:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    headers = {"MCP-Protocol-Version": version} if version else None
    return api.request("POST", "/mcp", json_body=message, headers=headers)


def call(api: LambdaClient, tool: str, **arguments: Any) -> dict[str, Any]:
    reply = rpc(api, "tools/call", {"name": tool, "arguments": arguments})
    assert reply.status == 200, reply.text
    return reply.json()["result"]


def credentials(result: dict[str, Any]) -> dict[str, str]:
    created = result["structuredContent"]
    return {"address_id": created["address"]["id"], "read_token": created["credentials"]["read_token"]}


@pytest.fixture
def api(moto_api: LambdaClient) -> LambdaClient:
    return moto_api


def test_initialize_negotiates_a_handshake_version_and_keeps_no_session(api: LambdaClient):
    offer = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    reply = rpc(api, "initialize", offer, version=None)
    assert reply.status == 200
    result = reply.json()["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"]["name"] == "cairn"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert "read_token" in result["instructions"]
    assert not any(name.lower() == "mcp-session-id" for name in reply.headers)

    newer = rpc(api, "initialize", {**offer, "protocolVersion": "2099-01-01"}, version=None).json()["result"]
    assert newer["protocolVersion"] == VERSION


def test_notifications_are_accepted_without_an_answer(api: LambdaClient):
    reply = rpc(api, "notifications/initialized", request_id=None)
    assert (reply.status, reply.text) == (202, "")


def test_tools_list_describes_every_tool_with_a_schema_and_hints(api: LambdaClient):
    tools = {tool["name"]: tool for tool in rpc(api, "tools/list").json()["result"]["tools"]}
    assert set(tools) == TOOL_NAMES
    assert tools["poll_events"]["annotations"]["readOnlyHint"] is True
    assert tools["acknowledge_event"]["annotations"]["idempotentHint"] is True
    assert tools["create_return_address"]["annotations"]["idempotentHint"] is False
    assert tools["set_state"]["inputSchema"]["required"] == ["address_id", "read_token", "key", "value"]
    assert "wait" in tools["poll_events"]["inputSchema"]["properties"]
    for tool in tools.values():
        assert tool["inputSchema"]["type"] == "object"
        # Each says what it changes (or that it changes nothing) and how it fails.
        description = tool["description"].lower()
        assert "fail" in description or "changes nothing" in description


def test_the_openapi_description_of_mcp_names_every_tool_it_offers(api: LambdaClient):
    spec = api.request("GET", "/openapi.json").json()
    described = spec["paths"]["/mcp"]["post"]["description"]
    offered = described.split("Tools: ", 1)[1].split(".", 1)[0]
    assert set(offered.split(", ")) == TOOL_NAMES


def test_every_tool_answers_with_the_json_of_its_rest_endpoint(api: LambdaClient):
    created = call(api, "create_return_address", task_id="mcp-test", expires_in_seconds=3600)
    assert created["isError"] is False
    document = created["structuredContent"]
    assert set(document) == {"address", "credentials", "endpoints"}
    assert document["address"]["task_id"] == "mcp-test"
    creds = credentials(created)
    token = creds["read_token"]

    written = call(api, "set_state", **creds, key="plan", value={"step": 1}, if_revision=0)["structuredContent"]
    assert (written["value"], written["revision"]) == ({"step": 1}, 1)
    rest = api.request("GET", "/api/v1/addresses/" + creds["address_id"] + "/state/plan", token=token).json()
    assert call(api, "get_state", **creds, key="plan")["structuredContent"] == rest
    rest_keys = api.request("GET", "/api/v1/addresses/" + creds["address_id"] + "/state", token=token).json()
    assert call(api, "list_state", **creds)["structuredContent"] == rest_keys

    page = call(api, "poll_events", **creds, after=0)["structuredContent"]
    assert [event["type"] for event in page["events"]] == ["state.updated"]
    assert page["next_cursor"] == 1
    event_id = page["events"][0]["id"]
    acked = call(api, "acknowledge_event", **creds, event_id=event_id)["structuredContent"]
    again = call(api, "acknowledge_event", **creds, event_id=event_id)["structuredContent"]
    assert acked == again and acked["event"]["sequence"] == 1

    deleted = call(api, "delete_state", **creds, key="plan", if_revision=1)["structuredContent"]
    assert deleted == {"key": "plan", "deleted": True, "revision": 2}


def test_refusals_are_tool_errors_carrying_the_rest_error_body(api: LambdaClient):
    creds = credentials(call(api, "create_return_address"))
    call(api, "set_state", **creds, key="plan", value=1, if_revision=0)

    conflict = call(api, "set_state", **creds, key="plan", value=2, if_revision=0)
    assert conflict["isError"] is True
    assert conflict["structuredContent"]["error"]["code"] == "revision_conflict"
    assert conflict["structuredContent"]["error"]["current_revision"] == 1
    assert '"revision_conflict"' in conflict["content"][0]["text"]

    wrong = call(api, "poll_events", address_id=creds["address_id"], read_token="crt_wrong")
    assert wrong["structuredContent"]["error"]["code"] == "unauthorized"
    missing = call(api, "get_state", **creds, key="nothing")
    assert missing["structuredContent"]["error"]["code"] == "not_found"

    bad = call(api, "poll_events", address_id=creds["address_id"], wait=60)
    assert bad["isError"] is True
    fields = {field["field"] for field in bad["structuredContent"]["error"]["fields"]}
    assert fields == {"read_token", "wait"}
    # Arguments are never echoed back: a mistyped call must not leak a token into the transcript.
    leaky = call(api, "get_state", **creds, key="plan", extra="x")
    assert creds["read_token"] not in leaky["content"][0]["text"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("{not json", 400, -32700),
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400, -32600),
        ('{"id": 1, "method": "ping"}', 400, -32600),
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', 400, -32600),
        ('{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', 400, -32600),
        ('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', 400, -32600),
        ('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', 400, -32600),
        ('{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}', 400, -32600),
        ("", 400, -32700),
        (" \n", 400, -32700),
    ],
)
def test_malformed_messages_get_json_rpc_errors(api: LambdaClient, body: str, status: int, code: int):
    reply = api.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
    assert reply.status == status
    assert reply.json()["error"]["code"] == code
    assert reply.json()["id"] is None


def test_protocol_errors(api: LambdaClient):
    assert rpc(api, "tools/call", {"name": "launch_rockets", "arguments": {}}).json()["error"]["code"] == -32602
    assert rpc(api, "resources/list", {}).json()["error"]["code"] == -32601
    assert rpc(api, "ping").json()["result"] == {}

    newer = rpc(api, "server/discover", {}, version="2026-07-28")
    assert newer.status == 400
    error = newer.json()["error"]
    assert error["code"] == -32022
    assert VERSION in error["data"]["supported"]


def test_poll_events_takes_the_cursors_the_rest_route_takes(api: LambdaClient):
    assert tools.MAX_CURSOR == events.MAX_CURSOR
    creds = credentials(call(api, "create_return_address"))
    assert call(api, "poll_events", **creds, after=events.MAX_CURSOR)["isError"] is False
    refused = call(api, "poll_events", **creds, after=events.MAX_CURSOR + 1)
    assert refused["isError"] and refused["structuredContent"]["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_offers_no_stream_and_delete_no_session(api: LambdaClient, method: str):
    reply = api.request(method, "/mcp")
    assert reply.status == 405
    assert reply.headers["Allow"] == "POST"
    assert reply.json()["error"]["code"] == "method_not_allowed"


def test_a_notification_under_an_unsupported_version_is_refused(api: LambdaClient):
    reply = rpc(api, "notifications/initialized", request_id=None, version="1999-01-01")
    assert (reply.status, reply.json()["error"]["code"], reply.json()["id"]) == (400, -32022, None)
    assert rpc(api, "notifications/initialized", request_id=None).status == 202


def test_what_an_error_repeats_of_a_request_stays_short(api: LambdaClient):
    long_name = '"' * 1_000_000
    for reply in (rpc(api, long_name), rpc(api, "tools/call", {"name": long_name, "arguments": {}})):
        assert reply.status == 200
        assert len(reply.text) < 1_000


def test_a_revision_is_an_integer_for_tools_as_for_rest(api: LambdaClient):
    """`true` and `"1"` passed as revision 1: a client's mistake became a write it never meant."""
    creds = credentials(call(api, "create_return_address"))
    assert call(api, "set_state", **creds, key="plan", value="v1")["isError"] is False
    for revision in (True, "1", 1.0):
        refused = call(api, "set_state", **creds, key="plan", value="v2", if_revision=revision)
        assert refused["isError"] and refused["structuredContent"]["error"]["code"] == "invalid_request"
        deleted = call(api, "delete_state", **creds, key="plan", if_revision=revision)
        assert deleted["isError"] is True
    assert call(api, "get_state", **creds, key="plan")["structuredContent"]["value"] == "v1"
    assert call(api, "poll_events", **creds, wait=0, after=0.0, limit="10")["isError"] is False, "as REST takes them"
    assert call(api, "create_return_address", expires_in_seconds=3600.0)["isError"] is False
    long_types = ["t" * 257]
    target = {"kind": "webhook", "url": "https://hooks.example.com/x"}
    refused = call(api, "create_subscription", **creds, target=target, types=long_types)
    assert refused["isError"] and refused["structuredContent"]["error"]["code"] == "invalid_request"


def test_discovery_points_agents_at_mcp(api: LambdaClient):
    assert "mcp" in api.request("GET", "/.well-known/agentaddress.json").json()["capabilities"]
    assert "/mcp" in api.request("GET", "/llms.txt").text
    assert "/mcp" in api.request("GET", "/openapi.json").json()["paths"]


def test_subscription_tools_answer_as_the_rest_routes(api: LambdaClient):
    creds = credentials(call(api, "create_return_address"))
    target = {"kind": "webhook", "url": "https://hooks.example.com/cairn"}
    created = call(api, "create_subscription", **creds, target=target, types=["email.received"])
    assert created["isError"] is False
    subscription = created["structuredContent"]["subscription"]
    assert (subscription["target"], subscription["types"]) == (target, ["email.received"])
    assert created["structuredContent"]["secret"].startswith("whsec_")
    listed = call(api, "list_subscriptions", **creds)["structuredContent"]
    rest = api.request(
        "GET", f"/api/v1/addresses/{creds['address_id']}/subscriptions", token=creds["read_token"]
    ).json()
    assert listed == rest == {"subscriptions": [subscription]}
    deleted = call(api, "delete_subscription", **creds, subscription_id=subscription["id"])
    assert deleted["structuredContent"] == {"subscription_id": subscription["id"], "deleted": True}
    again = call(api, "delete_subscription", **creds, subscription_id=subscription["id"])
    assert again["isError"] and again["structuredContent"]["error"]["code"] == "subscription_not_found"


@pytest.mark.parametrize(
    "target, code",
    [
        ({"kind": "webhook", "url": "https://10.0.0.1/"}, "target_refused"),
        # The host this request reached Cairn at: a wake-up would land in Cairn's own inbox.
        ({"kind": "webhook", "url": "https://cairn.test/api/v1/inbox/addr_x/secret"}, "target_refused"),
        ({"kind": "pigeon"}, "invalid_request"),
        ({"kind": "lambda", "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:x"}, "target_refused"),
    ],
)
def test_refused_subscriptions_are_tool_errors(api: LambdaClient, target: dict, code: str):
    creds = credentials(call(api, "create_return_address"))
    result = call(api, "create_subscription", **creds, target=target)
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == code
    assert call(api, "list_subscriptions", **creds)["structuredContent"] == {"subscriptions": []}


def test_file_tools_keep_text_and_bytes_that_the_rest_routes_read_back(api: LambdaClient):
    creds = credentials(call(api, "create_return_address"))
    files_url = f"/api/v1/addresses/{creds['address_id']}/files"

    def rest(path: str, body: dict[str, Any]) -> Any:
        return api.request("POST", files_url + path, json_body=body, token=creds["read_token"]).json()

    plan = "# Plan\n\n1. ship — then rest ✓\n"
    written = call(api, "write_file", **creds, key="notes/plan.md", text=plan)
    assert (written["isError"], written["structuredContent"]) == (
        False,
        {"key": "notes/plan.md", "size": len(plan.encode())},
    )
    binary = base64.b64encode(b"\x89PNG\xff\x00").decode()
    call(api, "write_file", **creds, key="notes/logo.png", data_base64=binary)

    assert rest("/read", {"key": "notes/plan.md"})["data"] == base64.b64encode(plan.encode()).decode()
    assert call(api, "read_file", **creds, key="notes/plan.md")["structuredContent"] == {
        "key": "notes/plan.md",
        "size": len(plan.encode()),
        "text": plan,
    }
    assert call(api, "read_file", **creds, key="notes/logo.png")["structuredContent"] == {
        "key": "notes/logo.png",
        "size": 6,
        "data": binary,
    }
    first = call(api, "list_files", **creds, prefix="notes/", limit=1)["structuredContent"]
    assert (
        first
        == rest("/list", {"prefix": "notes/", "limit": 1})
        == {"keys": ["notes/logo.png"], "next": "notes/logo.png"}
    )
    rest_of_it = call(api, "list_files", **creds, prefix="notes/", after=first["next"])["structuredContent"]
    assert rest_of_it == {"keys": ["notes/plan.md"], "next": None}

    deleted = [call(api, "delete_file", **creds, key="notes/logo.png")["structuredContent"] for _ in range(2)]
    assert deleted == [{"key": "notes/logo.png", "deleted": True}, {"key": "notes/logo.png", "deleted": False}]
    missing = call(api, "read_file", **creds, key="notes/logo.png")
    assert missing["isError"] and missing["structuredContent"]["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("content", "as_text"),
    [("\x00" * 1_000_000, False), ('"' * 1_000_000, False), ("界" * 300_000, False), ("ok\n" * 300_000, True)],
    ids=["control", "quotes", "cjk", "lines"],
)
def test_a_read_file_answer_of_text_that_escapes_large_is_base64(api: LambdaClient, content: str, as_text: bool):
    """A tool result holds its answer twice, the second time escaped again: a file of control characters
    once made an answer thirteen times its size. Such text is answered in base64."""
    creds = credentials(call(api, "create_return_address"))
    call(api, "write_file", **creds, key="f", text=content)

    message = {"name": "read_file", "arguments": {**creds, "key": "f"}}
    reply, size = api.sent(
        "POST",
        "/mcp",
        json_body={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": message},
        headers={"MCP-Protocol-Version": VERSION},
    )

    answered = reply.json()["result"]["structuredContent"]
    data = content.encode()
    assert ("text" in answered) is as_text
    assert answered.get("text", content) == content
    assert base64.b64decode(answered.get("data", base64.b64encode(data))) == data
    assert size < max(tools.MAX_TEXT_ANSWER_BYTES, 3 * len(base64.b64encode(data)))


@pytest.mark.parametrize(
    "arguments, code",
    [
        ({"key": "k"}, "invalid_request"),  # no content
        ({"key": "k", "text": "a", "data_base64": "YQ=="}, "invalid_request"),  # two
        ({"key": "k", "data_base64": "not base64!"}, "invalid_request"),
        ({"key": "bad\nkey", "text": "a"}, "invalid_request"),
        ({"key": "k", "text": "x" * (3 * 1024 * 1024 + 1)}, "payload_too_large"),
    ],
)
def test_refused_file_writes_are_tool_errors_and_store_nothing(api: LambdaClient, arguments: dict, code: str):
    creds = credentials(call(api, "create_return_address"))
    result = call(api, "write_file", **creds, **arguments)
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == code
    assert call(api, "list_files", **creds)["structuredContent"] == {"keys": [], "next": None}


@pytest.mark.parametrize("text", ['"' * 100_000, "\\" * 100_000, "界" * 100_000], ids=["quotes", "backslashes", "cjk"])
def test_polled_pages_of_escaped_text_fit_a_lambda_answer_and_lose_nothing(memory_api: LambdaClient, text: str):
    """A tool result carries its page twice, the second time as JSON text in a string, where each quote and
    backslash costs twice again: pages of quotes once made 7 MB answers, which Lambda cannot return."""
    created = memory_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])
    for n in range(12):
        body = json.dumps({"type": f"big.{n}", "data": text}, ensure_ascii=False).encode()
        assert memory_api.request("POST", inbox, body=body, headers={"Content-Type": "application/json"}).status == 202
    owner = {"address_id": created["address"]["id"], "read_token": created["credentials"]["read_token"]}
    seen: list[str] = []
    after = 0
    while True:
        message = {"name": "poll_events", "arguments": {**owner, "after": after, "limit": 100}}
        reply, size = memory_api.sent(
            "POST",
            "/api/mcp",
            json_body={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": message},
            headers={"MCP-Protocol-Version": VERSION},
        )
        assert size < LAMBDA_ANSWER_LIMIT
        page = reply.json()["result"]["structuredContent"]
        assert json.loads(reply.json()["result"]["content"][0]["text"]) == page
        seen += [event["type"] for event in page["events"]]
        if not page["has_more"]:
            break
        after = page["next_cursor"]
    assert seen == [f"big.{n}" for n in range(12)], "nothing lost, nothing repeated"


def test_arguments_with_thousands_of_problems_are_answered_in_a_few_kilobytes(api: LambdaClient):
    """Every problem was named twice, whole, and the result held it twice again: 600,000 unknown arguments
    made a 127 MB answer after a gigabyte of memory."""
    arguments = {"address_id": "addr_x", "read_token": "t", "key": "k", "value": 1}
    unknown = {f"u{n}": 0 for n in range(5_000)}
    reply = rpc(api, "tools/call", {"name": "set_state", "arguments": {**arguments, **unknown}})
    result = reply.json()["result"]
    assert result["isError"] and len(reply.content) < 20_000
    error = result["structuredContent"]["error"]
    assert len(error["fields"]) == 20 and error["message"].endswith("; and 4980 more")
    params = {"protocolVersion": VERSION, "clientInfo": {"name": "c", "version": "1"}, "capabilities": 1}
    invalid = rpc(api, "initialize", {**params, "clientInfo": {"name": "c" * 100_000}})
    assert invalid.json()["error"]["code"] == -32602 and len(invalid.content) < 5_000


def test_a_body_of_more_values_than_validation_can_name_is_refused_before_it(api: LambdaClient):
    many = {f"u{n}": 0 for n in range(jsontext.MAX_VALIDATED_VALUES + 1)}
    reply = rpc(api, "tools/call", {"name": "set_state", "arguments": many})
    assert reply.status == 413 and reply.json()["error"]["code"] == -32600 and len(reply.content) < 1_000
