"""One nesting limit where JSON bodies are decoded; values stored deeper before it still read back. In memory.

Before the limit, an inbox post or a state write nested a few hundred levels
deep was stored, and every answer that held it failed (pydantic serializes at
most 255 levels). Such values are written here the way the adapter stores
them and read through every surface that shows them: never a 500, the value
as its JSON text, marked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn import jsontext
from cairn.addresses import inbox_bodies
from cairn.addresses.models import HTTP_SURFACE, STATE_SURFACE, NewEvent
from cairn.addresses.ports import AppendRequest
from cairn.addresses.state import EVENT_SOURCE, EVENT_TYPE, entry_size
from cairn.addresses.state_model import KeyChange, StateChanges, StateLimits
from cairn.api.sse import event_frame
from cairn.client.sse import Message, parse
from cairn.errors import InvalidJson
from cairn.wakeups.payload import event_delivery
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient

MAX = jsontext.MAX_DEPTH
# Just past the limit, the 300 levels that once made a feed unreadable, and about as deep as Python's
# decoder took a body before there was a limit.
STORED_DEPTHS = [MAX + 1, 300, 900]


def deep_text(depth: int) -> str:
    """Canonical JSON nesting `depth` levels, objects and arrays in turn, with brackets inside its strings."""
    opening = "".join('{"a[":' if level % 2 == 0 else "[" for level in range(depth))
    closing = "".join("}" if level % 2 == 0 else "]" for level in reversed(range(depth)))
    return opening + '"]}"' + closing


def rpc(api: LambdaClient, path: str, tool: str, **arguments: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    reply = api.request("POST", path, json_body=message, headers={"MCP-Protocol-Version": "2025-11-25"})
    assert reply.status == 200, reply.text
    result = reply.json()["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


# -- the limit ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[{{"', 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["\\"[[[", "\\\\", ["]"]]', 2),
        (deep_text(MAX), MAX),
        (deep_text(900), 900),
    ],
)
def test_depth_counts_brackets_outside_strings(text: str, depth: int):
    assert jsontext.depth(text) == depth


def nesting(value: Any) -> int:
    """The depth of a decoded value, the reference `jsontext.depth` must agree with."""
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    return 0


# Strings made of what could confuse a scan of the text: brackets, quotes, backslashes, escapes.
TRICKY_TEXT = st.text(alphabet='[]{}"\\/\nxé😀', max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY_TEXT, inner, max_size=4),
    max_leaves=30,
)


@given(JSON_VALUES, st.booleans())
def test_depth_agrees_with_the_decoded_value_whatever_its_strings_hold(value: Any, ascii_only: bool):
    assert jsontext.depth(json.dumps(value, ensure_ascii=ascii_only)) == nesting(value)


def test_parse_takes_the_limit_and_refuses_one_level_more():
    assert jsontext.parse(deep_text(MAX)) == json.loads(deep_text(MAX))
    for text in (deep_text(MAX + 1), "[" * (MAX + 1) + "]" * (MAX + 1), "[" * 100_000):
        with pytest.raises(InvalidJson) as refused:
            jsontext.parse(text)
        assert refused.value.details == {"max_depth": MAX}
    # Brackets inside strings nest nothing.
    assert jsontext.parse(json.dumps(["[" * 10_000])) == ["[" * 10_000]


def test_an_inbox_body_too_deep_for_json_is_refused_unless_labelled_as_something_else():
    """As any body that is not JSON: refused when labelled JSON or not labelled, else kept as what its label says."""
    body = deep_text(300).encode()
    for label in ("application/json", "application/cloudevents+json", ""):
        with pytest.raises(InvalidJson):
            inbox_bodies.read(body, label)
    kept = inbox_bodies.read(body, "text/plain")
    assert (kept.content_type, json.loads(kept.data_json)) == ("text/plain", body.decode())


# -- values stored before the limit ---------------------------------------------


@pytest.mark.parametrize("depth", STORED_DEPTHS)
def test_an_event_stored_deeper_than_the_limit_reads_back_as_its_marked_json_text(
    memory_api: LambdaClient, clock: FakeClock, depth: int
):
    created = memory_api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    assert memory_api.post_inbox(created, {"type": "before", "data": {"ok": True}}).status == 202
    stored = deep_text(depth)
    old = NewEvent("poison", "old-client", stored, HTTP_SURFACE, content_type="application/json")
    memory_api.services.table.append(AppendRequest(address_id, [old], None, clock()))
    assert memory_api.post_inbox(created, {"type": "after", "data": {"ok": True}}).status == 202

    page = memory_api.poll(created)
    assert page.status == 200, page.text
    before, poison, after = page.json()["events"]
    assert (poison["data"], poison["data_encoding"]) == (stored, "json_text")
    assert before["data"] == after["data"] == {"ok": True}
    assert "data_encoding" not in before and "data_encoding" not in after
    for endpoint in ("/mcp", "/api/mcp"):
        polled = rpc(memory_api, endpoint, "poll_events", address_id=address_id, read_token=token)
        assert polled["events"] == page.json()["events"]
    events = memory_api.services.table.list_events(address_id, after=0, limit=10, now=clock(), max_bytes=10**6).events
    [frame] = [item for item in parse(event_frame(events[1]).decode().splitlines()) if isinstance(item, Message)]
    assert json.loads(frame.data) == poison
    delivered = json.loads(event_delivery(address_id, "sub_1", events[1]).body)["event"]
    assert (delivered["data"], delivered["data_encoding"]) == (stored, "json_text")


@pytest.mark.parametrize("depth", STORED_DEPTHS)
def test_a_state_value_stored_deeper_than_the_limit_reads_back_as_its_marked_json_text(
    memory_api: LambdaClient, clock: FakeClock, depth: int
):
    created = memory_api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    stored = deep_text(depth)
    change = KeyChange("deep", None, 1, entry_size("deep", stored), stored)
    note = json.dumps({"key": "deep", "op": "set", "revision": 1, "size": change.size})
    memory_api.services.table.append(
        AppendRequest(
            address_id,
            [NewEvent(EVENT_TYPE, EVENT_SOURCE, note, STATE_SURFACE)],
            None,
            clock(),
            state=StateChanges([change], StateLimits(max_keys=32, max_bytes=65_536), None),
        )
    )

    read = memory_api.request("GET", f"/api/v1/addresses/{address_id}/state/deep", token=token)
    assert read.status == 200, read.text
    assert (read.json()["value"], read.json()["value_encoding"], read.json()["revision"]) == (stored, "json_text", 1)
    assert rpc(memory_api, "/mcp", "get_state", address_id=address_id, read_token=token, key="deep") == read.json()
    # The owner can replace it with a value within the limit, which reads back as JSON again.
    replaced = memory_api.request(
        "PUT", f"/api/v1/addresses/{address_id}/state/deep", json_body={"value": [1], "if_revision": 1}, token=token
    )
    assert replaced.status == 200, replaced.text
    assert memory_api.request("GET", f"/api/v1/addresses/{address_id}/state/deep", token=token).json()["value"] == [1]
