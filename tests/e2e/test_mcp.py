"""The MCP tools through the official `mcp` client: streamable HTTP on `cairn serve` and stdio via `cairn mcp`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.support.serve import ServeProcess

TOOLS = [
    "acknowledge_event",
    "add_contact",
    "create_return_address",
    "create_subscription",
    "delete_file",
    "delete_state",
    "delete_subscription",
    "get_state",
    "list_contacts",
    "list_files",
    "list_state",
    "list_subscriptions",
    "poll_events",
    "read_file",
    "send_email",
    "set_state",
    "verify_contact",
    "write_file",
]


async def exercise_every_tool(client: Client, served: ServeProcess) -> dict[str, Any]:
    """List the tools, then call each the way an agent would; what it saw, for the assertions."""
    listed = await client.list_tools()
    created = await client.call_tool("create_return_address", {"task_id": "mcp-e2e", "expires_in_seconds": 3600})
    document = created.structured_content
    creds = {"address_id": document["address"]["id"], "read_token": document["credentials"]["read_token"]}

    written = await client.call_tool("set_state", {**creds, "key": "plan", "value": {"step": 1}, "if_revision": 0})
    conflict = await client.call_tool("set_state", {**creds, "key": "plan", "value": {"step": 9}, "if_revision": 0})
    read = await client.call_tool("get_state", {**creds, "key": "plan"})
    listing = await client.call_tool("list_state", creds)

    # A long-poll that a callback arriving during the wait ends early.
    async def deliver_later() -> None:
        await anyio.sleep(0.5)
        async with httpx.AsyncClient() as http:
            await http.post(document["endpoints"]["inbox_url"], json={"type": "render.done"})

    async with anyio.create_task_group() as group:
        group.start_soon(deliver_later)
        begun = time.monotonic()
        waited = await client.call_tool("poll_events", {**creds, "after": 1, "wait": 15})
        waited_for = time.monotonic() - begun
    [callback] = waited.structured_content["events"]
    acked = await client.call_tool("acknowledge_event", {**creds, "event_id": callback["id"]})
    deleted = await client.call_tool("delete_state", {**creds, "key": "plan", "if_revision": 1})
    refused = await client.call_tool("poll_events", {**creds, "read_token": "crt_wrong"})

    person = {**creds, "email": "ada@example.org"}
    asked = await client.call_tool("add_contact", person)
    code = outbox_code(served)
    wrong = await client.call_tool("verify_contact", {**person, "code": "000000" if code != "000000" else "111111"})
    verified = await client.call_tool("verify_contact", {**person, "code": code})
    message = {**creds, "to": "ada@example.org", "subject": "Hi", "text": "From a tool.", "idempotency_key": "t1"}
    sent = await client.call_tool("send_email", message)
    contacts = await client.call_tool("list_contacts", creds)

    target = {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}
    subscribed = await client.call_tool("create_subscription", {**creds, "target": target, "types": ["job.done"]})
    subscription_id = subscribed.structured_content["subscription"]["id"]
    subscriptions = await client.call_tool("list_subscriptions", creds)
    unsubscribed = await client.call_tool("delete_subscription", {**creds, "subscription_id": subscription_id})

    note = {**creds, "key": "notes/plan.md"}
    filed = await client.call_tool("write_file", {**note, "text": "# Plan\n1. ship ✓\n"})
    file_read = await client.call_tool("read_file", note)
    files_listed = await client.call_tool("list_files", {**creds, "prefix": "notes/"})
    unfiled = await client.call_tool("delete_file", note)
    gone = await client.call_tool("read_file", note)
    with pytest.raises(MCPError):
        await client.call_tool("launch_rockets", {})
    return {
        "tools": sorted(tool.name for tool in listed.tools),
        "created": document,
        "written": written.structured_content,
        "conflict": (conflict.is_error, conflict.structured_content),
        "read": read.structured_content,
        "listing": listing.structured_content,
        "waited": (callback["type"], callback["ingress_surface"], waited_for),
        "acked": acked.structured_content,
        "deleted": deleted.structured_content,
        "refused": (refused.is_error, refused.structured_content),
        "mail": {
            "asked": asked.structured_content["status"],
            "code_shown": code in json.dumps(asked.structured_content),
            "wrong": wrong.structured_content["error"]["code"],
            "verified": verified.structured_content["status"],
            "sent": sent.structured_content["status"],
            "contacts": contacts.structured_content,
        },
        "subscribed": subscribed.structured_content,
        "subscriptions": subscriptions.structured_content,
        "unsubscribed": unsubscribed.structured_content,
        "files": [each.structured_content for each in (filed, file_read, files_listed, unfiled)]
        + [(gone.is_error, gone.structured_content["error"]["code"])],
    }


def outbox_code(served: ServeProcess) -> str:
    """The code in the verification mail `cairn serve` wrote to its outbox (no relay configured)."""
    [mail] = (served.data_dir / "outbox").glob("*.eml")
    return re.search(rb"code is: (\d{6})", mail.read_bytes()).group(1).decode()


def check(seen: dict[str, Any], served: ServeProcess) -> None:
    assert seen["tools"] == TOOLS
    assert seen["created"]["endpoints"]["events_url"].startswith(served.base_url)
    assert (seen["written"]["value"], seen["written"]["revision"]) == ({"step": 1}, 1)
    is_error, body = seen["conflict"]
    assert is_error and body["error"]["code"] == "revision_conflict" and body["error"]["current_revision"] == 1
    assert seen["read"]["value"] == {"step": 1}
    assert seen["listing"]["usage"]["keys"] == 1
    kind, surface, waited_for = seen["waited"]
    assert (kind, surface) == ("render.done", "http")
    # Before its own 15 s timeout: it woke on the commit.
    assert waited_for < 15, "the long-poll waited for its timeout instead of waking"
    assert seen["acked"]["event"]["acknowledged_at"]
    assert seen["deleted"] == {"key": "plan", "deleted": True, "revision": 2}
    is_error, body = seen["refused"]
    assert is_error and body["error"]["code"] == "unauthorized"
    mail = seen["mail"]
    assert (mail["asked"], mail["code_shown"], mail["wrong"]) == ("pending", False, "wrong_code")
    assert (mail["verified"], mail["sent"]) == ("verified", "accepted")
    assert mail["contacts"]["outbound_configured"] is True
    assert [contact["status"] for contact in mail["contacts"]["contacts"]] == ["verified"]

    subscription = seen["subscribed"]["subscription"]
    assert seen["subscribed"]["secret"].startswith("whsec_")
    assert seen["subscriptions"]["subscriptions"] == [subscription]
    assert seen["unsubscribed"] == {"subscription_id": subscription["id"], "deleted": True}
    size = len("# Plan\n1. ship ✓\n".encode())
    assert seen["files"] == [
        {"key": "notes/plan.md", "size": size},
        {"key": "notes/plan.md", "size": size, "text": "# Plan\n1. ship ✓\n"},
        {"keys": ["notes/plan.md"], "next": None},
        {"key": "notes/plan.md", "deleted": True},
        (True, "not_found"),
    ]


def test_streamable_http_on_cairn_serve(served: ServeProcess):
    async def scenario() -> dict[str, Any]:
        async with Client(f"{served.base_url}/mcp") as client:
            assert client.protocol_version == "2025-11-25"
            return await exercise_every_tool(client, served)

    check(anyio.run(scenario), served)


def test_stdio_via_cairn_mcp(served: ServeProcess):
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cairn.cli", "mcp", "--url", served.base_url],
        env={**os.environ},
    )

    async def scenario() -> dict[str, Any]:
        async with Client(server) as client:
            return await exercise_every_tool(client, served)

    check(anyio.run(scenario), served)


def test_agentaddress_mcp_endpoint_offers_exactly_its_three_tools(served: ServeProcess):
    """AgentAddress's MCP example lists the tools at `/api/mcp` and expects exactly these, with its inputs."""

    async def scenario() -> dict[str, Any]:
        async with Client(f"{served.base_url}/api/mcp") as client:
            listed = await client.list_tools()
            created = await client.call_tool("create_return_address", {"name": "mcp", "task_id": "mcp"})
            document = created.structured_content
            creds = {"address_id": document["address"]["id"], "read_token": document["credentials"]["read_token"]}
            async with httpx.AsyncClient() as http:
                await http.post(document["endpoints"]["inbox_url"], json={"type": "render.done"})
            page = await client.call_tool("poll_events", {**creds, "after": 0, "limit": 10})
            [event] = page.structured_content["events"]
            acked = await client.call_tool("acknowledge_event", {**creds, "event_id": event["id"]})
            waiting = await client.call_tool("poll_events", {**creds, "wait": 5})
            with pytest.raises(MCPError):
                await client.call_tool("set_state", {**creds, "key": "plan", "value": 1})
            return {
                "inputs": {tool.name: sorted(tool.input_schema["properties"]) for tool in listed.tools},
                "event": (event["type"], event["ingress_surface"]),
                "acked": acked.structured_content["event"]["acknowledged_at"],
                "waiting": (waiting.is_error, waiting.structured_content["error"]["code"]),
            }

    seen = anyio.run(scenario)
    assert seen["inputs"] == {
        "acknowledge_event": ["address_id", "event_id", "read_token"],
        "create_return_address": ["expires_in_seconds", "name", "task_id"],
        "poll_events": ["address_id", "after", "limit", "read_token"],
    }
    assert seen["event"] == ("render.done", "http")
    assert seen["acked"]
    # AgentAddress's poll answers at once: a `wait` is an input it does not have.
    assert seen["waiting"] == (True, "invalid_request")


def test_stdio_answers_every_line_that_is_no_message_and_goes_on(served: ServeProcess):
    """The mcp package only logged such lines: a client that sent a batch waited forever."""
    lines = [
        "{not json",
        '[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
        '{"jsonrpc": "1.0", "id": 2, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": 3}',
        # Requests whose id is no request id: the mcp package read them as notifications, never answered.
        '{"jsonrpc": "2.0", "id": 4.5, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": null, "method": "tools/list"}',
        '{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    ]
    initialize = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    command = [sys.executable, "-m", "cairn.cli", "mcp", "--url", served.base_url]
    # Blank lines between messages are no messages and get no answer.
    sent = "\n".join(["", *lines, "   ", json.dumps(initialize)]) + "\n"
    # All at once, then the end of input: the server answers what it read before it stops.
    done = subprocess.run(command, input=sent, capture_output=True, text=True, timeout=30, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(lines) + 1
    codes = [(answer["id"], answer["error"]["code"]) for answer in answers[:-1]]
    assert codes == [(None, -32700), *[(None, -32600)] * (len(lines) - 1)]
    assert answers[-1]["id"] == 7 and answers[-1]["result"]["serverInfo"]["name"] == "cairn"
