"""Hand-written hostile input over real HTTP against `cairn serve`.

Each request is one a careless or malicious client could send. Every answer
is a JSON error with a stable code (never a 5xx), and afterwards the
address's state and feed are exactly as they were.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest

from cairn.client import Address, HttpClient
from cairn.jsontext import MAX_DEPTH
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

DEEP = 10_000
JSON = {"Content-Type": "application/json"}


@dataclass
class Target:
    """A live address with some state and one event, and the client that reaches it."""

    server: ServeProcess
    client: httpx.Client
    created: dict

    @property
    def id(self) -> str:
        return self.created["address"]["id"]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.created['credentials']['read_token']}"}

    @property
    def token(self) -> str:
        return self.created["credentials"]["read_token"]

    @property
    def inbox(self) -> str:
        return urlsplit(self.created["endpoints"]["inbox_url"]).path

    @property
    def state(self) -> str:
        return f"/api/v1/addresses/{self.id}/state"

    def snapshot(self) -> tuple[dict, dict]:
        """Everything a hostile request could have changed: every state key and every event."""
        keys = self.client.get(self.state, headers=self.auth)
        feed = self.client.get(f"/api/v1/addresses/{self.id}/events", params={"after": 0}, headers=self.auth)
        assert keys.status_code == feed.status_code == 200
        values = {
            entry["key"]: self.client.get(f"{self.state}/{entry['key']}", headers=self.auth).json()
            for entry in keys.json()["keys"]
        }
        return {"listing": keys.json(), "values": values}, feed.json()


@pytest.fixture
def target(served: ServeProcess):
    with served.client() as client:
        created = client.post("/api/v1/addresses", json={"task_id": "hostile"}).json()
        seeded = Target(served, client, created)
        assert client.put(f"{seeded.state}/plan", json={"value": ["fetch"]}, headers=seeded.auth).status_code == 201
        assert client.post(seeded.inbox, json={"type": "seed"}).status_code == 202
        yield seeded


def assert_refused(reply: httpx.Response, status: int, code: str) -> None:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["code"] == code


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def mixed(depth: int) -> bytes:
    """JSON nesting `depth` levels, objects and arrays in turn, with brackets inside its strings."""
    opening = b"".join(b'{"k[":' if level % 2 == 0 else b"[" for level in range(depth))
    closing = b"".join(b"}" if level % 2 == 0 else b"]" for level in reversed(range(depth)))
    return opening + b'"]}"' + closing


def raw_request(server: ServeProcess, request: bytes) -> tuple[int, bytes]:
    """Send bytes no HTTP client library would: the status line's code and the rest of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
            if b"\r\n0\r\n\r\n" in answer or b"Connection: close" in answer and b"\r\n\r\n" in answer:
                break
    return int(answer.split(b" ", 2)[1]), answer


def test_json_nested_ten_thousand_levels_deep_is_invalid_json(target: Target):
    before = target.snapshot()
    value = b'{"value": ' + nested(DEEP) + b"}"
    batch = b'{"operations": [{"key": "deep", "op": "set", "value": ' + nested(DEEP) + b"}]}"
    assert_refused(target.client.post(target.inbox, content=nested(DEEP), headers=JSON), 400, "invalid_json")
    assert_refused(
        target.client.put(f"{target.state}/deep", content=value, headers={**JSON, **target.auth}), 400, "invalid_json"
    )
    assert_refused(
        target.client.post(target.state, content=batch, headers={**JSON, **target.auth}), 400, "invalid_json"
    )
    assert target.snapshot() == before


def rpc_call(tool: str, **arguments: object) -> dict:
    """A JSON-RPC message calling one of the MCP endpoint's tools."""
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


MCP = {**JSON, "MCP-Protocol-Version": "2025-11-25"}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300])
@pytest.mark.parametrize("shape", [nested, nested_objects], ids=["arrays", "objects"])
def test_json_nested_past_the_limit_is_invalid_json_and_stores_nothing(target: Target, depth: int, shape):
    """Past `MAX_DEPTH` (300 levels once made a feed unreadable for good) is refused wherever a body is
    decoded, before anything is stored: every value Cairn holds can be answered."""
    before = target.snapshot()
    value = shape(depth)
    owner = {**JSON, **target.auth}
    batch = b'{"operations": [{"key": "deep", "op": "set", "value": ' + value + b"}]}"
    for reply in (
        target.client.post(target.inbox, content=value, headers=JSON),
        target.client.post(target.inbox, content=b'{"type": "poison", "data": ' + value + b"}", headers=JSON),
        target.client.put(f"{target.state}/deep", content=b'{"value": ' + value + b"}", headers=owner),
        target.client.post(target.state, content=batch, headers=owner),
    ):
        assert_refused(reply, 400, "invalid_json")
        assert reply.json()["error"]["max_depth"] == MAX_DEPTH
    memory_events = "/api/v1/memory/agent/runs/deep/events"
    worker = {**JSON, **target.server.worker_headers}
    memory = b'{"events": [{"type": "user_message", "data": {"message": "m", "structured": ' + value + b"}}]}"
    assert_refused(target.client.post(memory_events, content=memory, headers=worker), 400, "invalid_json")
    assert target.client.get(memory_events, headers=worker).json()["events"] == []
    message = rpc_call("set_state", address_id=target.id, read_token=target.token, key="deep", value="VALUE")
    rpc = target.client.post("/mcp", content=json.dumps(message).encode().replace(b'"VALUE"', value), headers=MCP)
    assert rpc.status_code == 400 and rpc.json()["error"]["code"] == -32700
    assert target.snapshot() == before


def test_json_nested_to_the_limit_reads_back_equal_through_every_surface(target: Target):
    """The deepest values accepted come back equal from the page, the event stream, both MCP endpoints,
    state and the SDK."""
    deepest = mixed(MAX_DEPTH)
    posted = target.client.post(target.inbox, content=deepest, headers={**JSON, "Idempotency-Key": "deepest"})
    assert posted.status_code == 202, posted.text
    after = posted.json()["event"]["sequence"] - 1
    page = target.client.get(f"/api/v1/addresses/{target.id}/events", params={"after": after}, headers=target.auth)
    assert page.status_code == 200, page.text
    event = page.json()["events"][0]
    assert event["data"] == json.loads(deepest) and "data_encoding" not in event
    for endpoint in ("/mcp", "/api/mcp"):
        message = rpc_call("poll_events", address_id=target.id, read_token=target.token, after=after, limit=1)
        polled = target.client.post(endpoint, json=message, headers=MCP)
        assert polled.status_code == 200, polled.text
        assert polled.json()["result"]["structuredContent"]["events"] == [event]

    # State: the deepest value a write takes ({"value": ...} nests one level more), alone and in a batch.
    value, batched = mixed(MAX_DEPTH - 1), mixed(MAX_DEPTH - 3)
    owner = {**JSON, **target.auth}
    put = target.client.put(f"{target.state}/deep", content=b'{"value": ' + value + b"}", headers=owner)
    assert put.status_code == 201, put.text
    assert put.json()["value"] == json.loads(value)
    batch = b'{"operations": [{"key": "batched", "op": "set", "value": ' + batched + b"}]}"
    written = target.client.post(target.state, content=batch, headers=owner)
    assert written.status_code == 200, written.text
    message = rpc_call("get_state", address_id=target.id, read_token=target.token, key="deep")
    got = target.client.post("/mcp", json=message, headers=MCP)
    assert got.json()["result"]["structuredContent"]["value"] == json.loads(value)

    with HttpClient() as http:
        address = Address(target.created, http=http)
        assert address.events.poll(after=after, limit=1)["events"] == [event]
        stream = address.events.stream(after=after)
        assert next(stream) == event  # the event stream's frame, read by the SDK
        stream.close()
        assert address.state.get("deep")["value"] == json.loads(value)
        assert address.state.get("batched")["value"] == json.loads(batched)


@pytest.mark.parametrize(
    "number",
    [b"1e400", b"-1e400", b"9" * 5_000, b"-" + b"1" * 5_000],
    ids=["float-overflow", "negative-float-overflow", "5000-digits", "negative-5000-digits"],
)
def test_numbers_json_cannot_carry_are_invalid_json(target: Target, number: bytes):
    """Infinity has no JSON form and Python refuses to convert 5,000-digit integers: both are refused, not stored."""
    before = target.snapshot()
    headers = {**JSON, **target.auth}
    assert_refused(
        target.client.post(target.inbox, content=b'{"data": ' + number + b"}", headers=JSON), 400, "invalid_json"
    )
    put = target.client.put(f"{target.state}/n", content=b'{"value": ' + number + b"}", headers=headers)
    assert_refused(put, 400, "invalid_json")
    revision = target.client.put(
        f"{target.state}/n", content=b'{"value": 1, "if_revision": ' + number + b"}", headers=headers
    )
    assert revision.status_code in (400, 422) and revision.json()["error"]["code"] in (
        "invalid_json",
        "invalid_request",
    )
    batch = b'{"operations": [{"key": "n", "op": "set", "value": ' + number + b"}]}"
    assert_refused(target.client.post(target.state, content=batch, headers=headers), 400, "invalid_json")
    assert target.snapshot() == before


@pytest.mark.parametrize(
    "body", [b"\xff\xfe{}", b'{"value": "\xc3\x28"}', b'{"a": "\xed\xa0\x80"}'], ids=["bom", "bad-pair", "surrogate"]
)
def test_bodies_that_are_not_utf8_are_invalid_json(target: Target, body: bytes):
    before = target.snapshot()
    headers = {**JSON, **target.auth}
    assert_refused(target.client.post(target.inbox, content=body, headers=JSON), 400, "invalid_json")
    assert_refused(target.client.put(f"{target.state}/k", content=body, headers=headers), 400, "invalid_json")
    assert_refused(target.client.post(target.state, content=body, headers=headers), 400, "invalid_json")
    assert_refused(target.client.post("/api/v1/addresses", content=body, headers=JSON), 400, "invalid_json")
    assert_refused(
        target.client.post(f"/api/v1/addresses/{target.id}/email/replay", content=body, headers=headers),
        400,
        "invalid_json",
    )
    assert target.snapshot() == before


@pytest.mark.parametrize(
    "escape", [b"\\udc00", b"\\ud800", b"x\\ud83dy"], ids=["low alone", "high alone", "high then text"]
)
def test_an_unpaired_surrogate_escape_is_invalid_json_on_every_route(target: Target, escape: bytes):
    """Such a string decodes to no character: refused where it enters, never a 500, never stored as U+FFFD."""
    before = target.snapshot()
    headers = {**JSON, **target.auth}
    text = b'"' + escape + b'"'
    inbox = target.client.post(target.inbox, content=text, headers={**JSON, "Idempotency-Key": "k"})
    assert_refused(inbox, 400, "invalid_json")
    assert inbox.json()["error"]["path"] == "$"
    nested_value = b'{"value": {"notes": ["ok", ' + text + b"]}}"
    put = target.client.put(f"{target.state}/k", content=nested_value, headers=headers)
    assert_refused(put, 400, "invalid_json")
    assert put.json()["error"]["path"] == "$.value.notes[1]"
    batch = b'{"operations": [{"key": "k", "op": "set", "value": ' + text + b"}]}"
    assert_refused(target.client.post(target.state, content=batch, headers=headers), 400, "invalid_json")
    assert_refused(
        target.client.post("/api/v1/addresses", content=b'{"name": ' + text + b"}", headers=JSON), 400, "invalid_json"
    )
    memory = b'{"events": [{"type": "planner_note", "data": {"note": ' + text + b"}}]}"
    memory_events = "/api/v1/memory/agent/runs/run/events"
    worker = target.server.worker_headers
    assert_refused(target.client.post(memory_events, content=memory, headers={**JSON, **worker}), 400, "invalid_json")
    assert target.client.get(memory_events, headers=worker).json()["events"] == []
    rpc = target.client.post("/mcp", content=b'{"jsonrpc": "2.0", "id": ' + text + b', "method": "ping"}', headers=JSON)
    assert rpc.status_code == 400 and rpc.json()["error"]["code"] == -32700
    assert target.snapshot() == before


def test_paired_surrogate_escapes_are_ordinary_characters(target: Target):
    posted = target.client.post(target.inbox, content=b'{"data": "\\ud83d\\ude00"}', headers=JSON)
    assert posted.status_code == 202
    feed = target.client.get(f"/api/v1/addresses/{target.id}/events", params={"after": 1}, headers=target.auth)
    assert feed.json()["events"][-1]["data"] == "\U0001f600"


def test_nul_bytes_in_keys_and_ids_are_refused(target: Target):
    before = target.snapshot()
    headers = {**JSON, **target.auth}
    # A percent-encoded NUL stays encoded, as API Gateway passes it: no key is spelled so, and no address.
    refused_key = (400, "invalid_request")
    assert_refused(target.client.put(f"{target.state}/a%00b", json={"value": 1}, headers=target.auth), *refused_key)
    assert_refused(target.client.get(f"{target.state}/a%00b", headers=target.auth), *refused_key)
    unknown = target.client.get(f"/api/v1/addresses/{target.id}%00/state", headers=target.auth)
    assert_refused(unknown, 401, "unauthorized")  # an address spelled so has no credentials
    assert_refused(target.client.post(f"{target.inbox}%00", json={"a": 1}), 401, "unauthorized")  # not its secret
    batch = b'{"operations": [{"key": "a\\u0000b", "op": "set", "value": 1}]}'
    assert_refused(target.client.post(target.state, content=batch, headers=headers), 400, "invalid_request")
    ack = target.client.post(f"/api/v1/addresses/{target.id}/events/evt_1%00/ack", headers=target.auth)
    assert_refused(ack, 404, "not_found")
    assert target.snapshot() == before


def test_bodies_of_1_000_001_bytes_are_refused(target: Target):
    before = target.snapshot()
    oversized = b'{"data": "' + b"x" * (1_000_001 - 12) + b'"}'
    assert len(oversized) == 1_000_001
    assert_refused(target.client.post(target.inbox, content=oversized, headers=JSON), 413, "payload_too_large")
    value = b'{"value": "' + b"x" * (1_000_001 - 13) + b'"}'
    put = target.client.put(f"{target.state}/big", content=value, headers={**JSON, **target.auth})
    assert_refused(put, 413, "state_limit_exceeded")
    assert target.snapshot() == before


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("application/x-www-form-urlencoded", b"value=1"),
        (
            "multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="value"\r\n\r\n1\r\n--x--\r\n',
        ),
        ("text/plain", b"value: 1"),
        ("application/xml", b"<value>1</value>"),
    ],
    ids=["form", "multipart", "text", "xml"],
)
def test_state_bodies_must_be_json(target: Target, content_type: str, body: bytes):
    """Whatever the label, the bytes are read as JSON: a form is never decoded into the model (`["1"]` for `value=1`)."""
    before = target.snapshot()
    headers = {"Content-Type": content_type, **target.auth}
    assert_refused(target.client.put(f"{target.state}/typed", content=body, headers=headers), 400, "invalid_json")
    assert_refused(target.client.post(target.state, content=body, headers=headers), 400, "invalid_json")
    assert target.snapshot() == before


def test_the_inbox_refuses_what_claims_to_be_json_and_is_not(target: Target):
    """Other types are kept (as fields, text or bytes); a body labelled JSON, or not labelled, must be JSON."""
    before = target.snapshot()
    for headers in ({"Content-Type": "application/json"}, {"Content-Type": "application/vnd.api+json"}, {}):
        assert_refused(target.client.post(target.inbox, content=b"<a>1</a>", headers=headers), 400, "invalid_json")
    assert target.snapshot() == before


@pytest.mark.parametrize(
    "key",
    ["k" * 256, "tab\there", b"c1\x85\x9b".decode("latin-1"), ""],
    ids=["too-long", "tab", "c1-controls", "empty"],
)
def test_idempotency_keys_with_control_or_odd_characters_are_refused(target: Target, key: str):
    before = target.snapshot()
    reply = target.client.post(target.inbox, json={"a": 1}, headers={"Idempotency-Key": key.encode("latin-1")})
    assert_refused(reply, 400, "invalid_request")
    assert reply.json()["error"]["field"] == "Idempotency-Key"
    assert target.snapshot() == before


def test_crlf_in_an_idempotency_key_cannot_inject_a_header_or_an_event(target: Target):
    """A bare CR or a control character is refused by the HTTP parser itself, in Cairn's JSON error;
    CRLF only ends the header, so what follows is a separate header that nothing reads, and the
    answer echoes none of it."""
    before = target.snapshot()
    host = f"Host: 127.0.0.1:{target.server.port}\r\n".encode()
    for key in (b"a\rb", b"a\x00b", b"a\x01b", b"bell\x7f"):
        request = b"POST " + target.inbox.encode() + b" HTTP/1.1\r\n" + host
        request += b"Content-Type: application/json\r\nContent-Length: 2\r\nIdempotency-Key: " + key + b"\r\n\r\n{}"
        assert_parser_refused(raw_request(target.server, request), 400, "bad_request")
    assert target.snapshot() == before

    request = b"POST " + target.inbox.encode() + b" HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
    request += b"Content-Length: 2\r\nIdempotency-Key: split\r\nSet-Cookie: injected=1\r\n\r\n{}"
    status, answer = raw_request(target.server, request)
    assert status == 202
    assert b"injected" not in answer.lower() and b"set-cookie" not in answer.lower()
    # The key is `split`: a retry under it is a duplicate of that one event, not a new one.
    retry = target.client.post(target.inbox, json={}, headers={"Idempotency-Key": "split"})
    assert retry.status_code == 200 and retry.json()["duplicate"] is True


def assert_parser_refused(answer: tuple[int, bytes], status: int, code: str) -> None:
    """A raw answer is a JSON error with `code` that closes its connection."""
    got, text = answer
    head, _, body = text.partition(b"\r\n\r\n")
    assert got == status, text
    assert b"content-type: application/json" in head.lower() and b"connection: close" in head.lower()
    assert json.loads(body)["error"]["code"] == code


@pytest.mark.parametrize(
    "head",
    [
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\nX-Bare-LF: x\r\n\r\n",
        b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /healthz HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
        b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["space-in-name", "bare-lf", "bytes-in-path", "version", "two-lengths", "bad-chunk"],
)
def test_requests_the_http_parser_refuses_are_json_errors(target: Target, head: bytes):
    before = target.snapshot()
    assert_parser_refused(raw_request(target.server, head), 400, "bad_request")
    assert target.snapshot() == before


def test_a_request_head_past_64_kib_is_refused_unread_and_one_within_it_is_served(target: Target):
    """The request line and headers may hold 64 KiB (what a browser sends localhost can be large); the
    byte past that is refused with 431, before any more of a head that might never end is kept."""
    limit = 64 * 1024
    start = f"GET {target.state}/plan HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
    closing = f"Authorization: Bearer {target.token}\r\nConnection: close\r\n\r\n".encode()
    filler = limit - len(start) - len(closing) - len(b"X-Filler: \r\n")
    within = start + b"X-Filler: " + b"f" * filler + b"\r\n" + closing
    assert len(within) == limit
    status, answer = raw_request(target.server, within)
    assert status == 200 and b'"fetch"' in answer

    # One byte more than the bound and no end of the head in sight: refused at once, nothing read on.
    endless = start + b"X-Filler: " + b"f" * (limit + 1 - len(start) - len(b"X-Filler: "))
    assert_parser_refused(raw_request(target.server, endless), 431, "request_head_too_large")


@pytest.mark.parametrize(
    "path, status, code",
    [
        # The path as given (as API Gateway passes it), decoded once by the routes: no key holds `/`, `\` or `%`.
        ("/state/..%2F..%2F..%2Fhealthz", 400, "invalid_request"),
        ("/state/%2E%2E", 400, "invalid_request"),
        ("/state/..%252F..%252Fplan", 400, "invalid_request"),
        ("/state/..%5C..%5Cplan", 400, "invalid_request"),
        ("/events/evt_1/attachments/..%2F..%2F..%2Fstate", 404, "not_found"),
        ("/events/evt_1/attachments/%2E%2E", 404, "not_found"),
        ("/events/evt_1/attachments/..%5C..%5Cetc%5Cpasswd", 404, "not_found"),
    ],
)
def test_path_traversal_in_keys_and_attachment_ids_reaches_nothing(target: Target, path: str, status: int, code: str):
    before = target.snapshot()
    assert_refused(target.client.get(f"/api/v1/addresses/{target.id}{path}", headers=target.auth), status, code)
    # A deletion may name `..`, a key older versions let a batch set: here there is none.
    deleted = (404, "not_found") if path == "/state/%2E%2E" or not path.startswith("/state/") else (status, code)
    assert_refused(target.client.delete(f"/api/v1/addresses/{target.id}{path}", headers=target.auth), *deleted)
    assert target.snapshot() == before


def test_literal_dot_segments_are_not_resolved_into_another_route(target: Target):
    """HTTP clients normalise `..` away; a raw request keeps it, and still reaches no address's data."""
    before = target.snapshot()
    token = target.created["credentials"]["read_token"].encode()
    path = f"/api/v1/addresses/{target.id}/state/../../../addresses/{target.id}".encode()
    request = b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token + b"\r\n\r\n"
    status, answer = raw_request(target.server, request)
    assert status == 404 and b'"not_found"' in answer
    assert target.snapshot() == before


def test_over_long_path_parameters_are_refused(target: Target):
    before = target.snapshot()
    long_id = "addr_" + "a" * 4_000
    assert_refused(target.client.get(f"/api/v1/addresses/{long_id}", headers=target.auth), 401, "unauthorized")
    assert_refused(target.client.get(f"/api/v1/addresses/{long_id}/state", headers=target.auth), 401, "unauthorized")
    assert_refused(
        target.client.get(f"/api/v1/addresses/{long_id}/state/plan", headers=target.auth), 401, "unauthorized"
    )
    assert_refused(
        target.client.put(f"/api/v1/addresses/{long_id}/state/plan", json={"value": 1}, headers=target.auth),
        401,
        "unauthorized",
    )
    assert_refused(target.client.delete(f"/api/v1/addresses/{long_id}", headers=target.auth), 401, "unauthorized")
    assert_refused(target.client.get(f"/api/v1/addresses/{long_id}/events", headers=target.auth), 401, "unauthorized")
    assert_refused(target.client.post(f"/api/v1/inbox/{long_id}/secret", json={"a": 1}), 401, "unauthorized")
    assert_refused(target.client.post(f"{target.inbox}{'s' * 4_000}", json={"a": 1}), 401, "unauthorized")
    assert_refused(
        target.client.put(f"{target.state}/{'k' * 129}", json={"value": 1}, headers=target.auth), 400, "invalid_request"
    )
    long_event = "evt_1_" + "e" * 4_000
    ack = target.client.post(f"/api/v1/addresses/{target.id}/events/{long_event}/ack", headers=target.auth)
    assert_refused(ack, 404, "not_found")
    download = target.client.get(
        f"/api/v1/addresses/{target.id}/events/{long_event}/attachments/{'a' * 4_000}", headers=target.auth
    )
    assert_refused(download, 404, "not_found")
    assert target.snapshot() == before


def test_digits_that_are_not_ascii_are_refused_never_read_as_numbers(target: Target):
    """ "²" passes `str.isdigit` but not `int`; "٣" passes both and reads as 3."""
    before = target.snapshot()
    revision = target.client.delete(f"{target.state}/plan", headers={**target.auth, "If-Match": "²".encode("latin-1")})
    assert_refused(revision, 400, "invalid_request")
    for event_id in ("evt_%C2%B2_x", "evt_%D9%A3_x"):
        ack = target.client.post(f"/api/v1/addresses/{target.id}/events/{event_id}/ack", headers=target.auth)
        assert_refused(ack, 404, "not_found")
    assert target.snapshot() == before
    worker = target.server.worker_headers
    session = target.client.post(
        "/api/v1/runtime/create_session",
        json={"session_id": "digits", "created_at": "2026-11-29T12:00:00Z"},
        headers=worker,
    )
    assert session.status_code == 200, session.text
    for cursor in ("²", "٣", "１"):
        page = target.client.post(
            "/api/v1/runtime/list_session_run_records", json={"session_id": "digits", "cursor": cursor}, headers=worker
        )
        assert_refused(page, 422, "contract_error")
        assert "invalid cursor" in page.json()["error"]["message"]


def test_a_body_cut_short_by_a_dropped_connection_is_discarded(target: Target):
    """`Content-Length: 10`, five bytes, then the connection drops: no event, and the full retry is the first."""
    before = target.snapshot()
    path = target.inbox.encode()
    head = b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    cut = head + b"Idempotency-Key: cut-short\r\nContent-Length: 10\r\n\r\n12345"
    with socket.create_connection(("127.0.0.1", target.server.port), timeout=10) as connection:
        connection.sendall(cut)
        time.sleep(0.3)  # the server has the partial body before the connection goes
    time.sleep(0.5)
    assert target.snapshot() == before
    retry = target.client.post(target.inbox, content=b"1234567890", headers={**JSON, "Idempotency-Key": "cut-short"})
    assert retry.status_code == 202, retry.text
    events = target.snapshot()[1]["events"]
    assert [event["data"] for event in events[len(before[1]["events"]) :]] == [1234567890]


def test_agent_session_routes_refuse_malformed_items_and_keep_what_they_held(target: Target):
    """What reaches the inbox and state reaches a session's items too: refused whole, nothing added or removed."""
    items = f"/api/v1/addresses/{target.id}/sessions/hostile/items"
    headers = {**JSON, **target.auth}
    kept = target.client.post(items, json={"items": [{"role": "user", "content": "kept"}]}, headers=target.auth)
    assert kept.status_code == 201, kept.text
    for body, status, code in [
        (b'{"items": [' + nested_objects(MAX_DEPTH) + b"]}", 400, "invalid_json"),
        (b'{"items": [{"a": "\\ud800"}]}', 400, "invalid_json"),
        (b'{"items": [{"a": "\xc3\x28"}]}', 400, "invalid_json"),
        (b'{"items": [{"a": 1e400}]}', 400, "invalid_json"),
        (b'{"items": [{"a": ' + b"9" * 5_000 + b"}]}", 400, "invalid_json"),
        (b'{"items": [{"a": 1}]', 400, "invalid_json"),
        (b'{"items": [{"a": 1}], "items": 2}', 422, "invalid_request"),
        (b'{"items": [null]}', 422, "invalid_request"),
        (b'{"items": [{"a": "' + b"x" * 3_600_000 + b'"}]}', 413, "payload_too_large"),
    ]:
        assert_refused(target.client.post(items, content=body, headers=headers), status, code)
    assert_refused(target.client.get(items, params={"limit": "1e3"}, headers=target.auth), 422, "invalid_request")
    assert_refused(target.client.get(items, params={"before": "²"}, headers=target.auth), 422, "invalid_request")
    too_long = f"/api/v1/addresses/{target.id}/sessions/{'s' * 300}/items"
    assert_refused(target.client.post(f"{too_long}/pop", headers=target.auth), 400, "invalid_request")
    assert_refused(target.client.delete(too_long, headers=target.auth), 400, "invalid_request")
    stored = target.client.get(items, headers=target.auth)
    assert stored.json()["items"] == [{"role": "user", "content": "kept"}]


def test_hostile_store_batches_are_json_errors_and_store_nothing(target: Target):
    """LangGraph store batches a careless or malicious client could send: refused whole, never a 5xx."""
    before = target.snapshot()
    batch = f"/api/v1/addresses/{target.id}/store/batch"
    headers = {**JSON, **target.auth}
    put = b'{"op": "put", "namespace": ["ns"], "key": "k", "value": '
    raw = [
        (b'{"ops": [' + put + b'{"a": ' + nested(DEEP) + b"}}]}", 400, "invalid_json"),
        (b'{"ops": [' + put + b'{"a": 1e400}}]}', 400, "invalid_json"),
        (b'{"ops": [' + put + b'{"a": "\\ud800"}}]}', 400, "invalid_json"),
        (b'{"ops": [' + put + b'{"a": "\xc3\x28"}}]}', 400, "invalid_json"),
        (b'{"ops": [' + put + b'{"a": "' + b"x" * 1_000_001 + b'"}}]}', 413, "payload_too_large"),
        (b'{"ops": [' + put + b'{"a": 1}, "expected_version": ' + b"9" * 5_000 + b"}]}", 400, "invalid_json"),
    ]
    for body, status, code in raw:
        assert_refused(target.client.post(batch, content=body, headers=headers), status, code)
    ops = [
        ({"op": "put", "namespace": ["ns"], "key": "a\u0000b", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["n\u0000s"], "key": "k", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["ns"], "key": "k" * 2000, "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["x" * 300], "key": "k", "value": {}}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["ns"], "key": "k", "value": "not an object"}, 422, "invalid_request"),
        ({"op": "put", "namespace": ["ns"], "key": "k", "value": {}, "ttl": -1}, 422, "invalid_request"),
        (
            {"op": "put", "namespace": ["ns"], "key": "k", "value": {}, "expected_version": 2**60},
            422,
            "invalid_request",
        ),
        ({"op": "search", "filter": {"a": {"$where": "1"}}}, 400, "invalid_request"),
        ({"op": "search", "offset": -1}, 422, "invalid_request"),
        ({"op": "list_namespaces", "prefix": ["a"] * 40}, 422, "invalid_request"),
        ({"op": "drop_table"}, 422, "invalid_request"),
    ]
    for op, status, code in ops:
        keep = {"op": "put", "namespace": ["kept"], "key": "k", "value": {"n": 1}}
        assert_refused(target.client.post(batch, json={"ops": [keep, op]}, headers=target.auth), status, code)
    assert_refused(target.client.post(batch, json={"ops": []}, headers=target.auth), 422, "invalid_request")
    assert_refused(
        target.client.post(batch, json={"ops": [{"op": "get"}] * 101}, headers=target.auth), 422, "invalid_request"
    )
    # Odd operands compare as no match: a search answers, it never fails on what a value holds.
    odd = {"op": "search", "filter": {"a": {"$gt": "text", "$lt": None}, "b": {"$gte": [1]}}}
    answered = target.client.post(batch, json={"ops": [odd]}, headers=target.auth)
    assert answered.status_code == 200 and answered.json()["results"] == [{"op": "search", "items": []}]
    everything = {"op": "list_namespaces"}
    listed = target.client.post(batch, json={"ops": [everything]}, headers=target.auth)
    assert listed.json()["results"] == [{"op": "list_namespaces", "namespaces": []}]
    assert target.snapshot() == before
