"""Server-sent events of the feed: framing, the route, the streaming Lambda loop, the SDK's reader. In memory."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from cairn.addresses.models import Event
from cairn.api.sse import HEARTBEAT, event_frame, wants_event_stream
from cairn.client import Address, HttpClient
from cairn.client import events as events_module
from cairn.client.cursor import CursorFile
from cairn.client.errors import UnexpectedAnswer
from cairn.client.events import MAX_RATE_WAIT_SECONDS
from cairn.client.sse import Comment, Message, lines, parse
from cairn.entrypoints.streaming import RuntimeApi, handle_next
from cairn.local.asgi import ResolverBridge
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, path_of
from tests.support.runtime_api import FakeRuntimeApi, response_headers


class StreamingContext:
    """The Lambda context of an edge that sends iterator bodies as they come (the streaming loop, `cairn serve`)."""

    streams_responses = True
    aws_request_id = "req"


def an_event(type_: str = "build.done", data: Any = None) -> Event:
    return Event(
        id="evt_7_abcd0123",
        sequence=7,
        type=type_,
        source="ci",
        data_json=json.dumps(data if data is not None else {"ok": True}),
        created_at=1_700_000_000.0,
        expires_at=1_800_000_000.0,
        ingress_surface="http",
    )


@pytest.fixture
def api(clock: FakeClock) -> LambdaClient:
    return LambdaClient.in_memory(clock, max_stream_seconds=2, stream_heartbeat_seconds=1)


def stream_request(api: LambdaClient, created: dict, **headers: str) -> dict[str, Any]:
    return api.event(
        "GET",
        path_of(created["endpoints"]["events_url"]),
        token=created["credentials"]["read_token"],
        headers={"Accept": "text/event-stream", **headers},
    )


def messages_of(chunks: list[bytes]) -> list[Message | Comment]:
    return list(parse(b"".join(chunks).decode().splitlines()))


# -- framing ------------------------------------------------------------------


def test_an_event_is_one_frame_id_type_and_the_page_json_on_one_line():
    frame = event_frame(an_event(data={"text": "two\nlines", "name": "é"}))
    lines = frame.decode().split("\n")
    assert lines[:2] == ["id: 7", "event: build.done"]
    assert lines[2].startswith("data: ") and lines[3:] == ["", ""]
    assert json.loads(lines[2].removeprefix("data: ")) == {
        "id": "evt_7_abcd0123",
        "sequence": 7,
        "type": "build.done",
        "source": "ci",
        "ingress_surface": "http",
        "data": {"text": "two\nlines", "name": "é"},
        "created_at": "2023-11-14T22:13:20.000Z",
        "acknowledged_at": None,
        "content_type": None,
        "headers": None,
        "verified_by": None,
    }


@pytest.mark.parametrize(
    "type_",
    [
        "a\nretry: 1",
        "a\r\nid: 99",
        "line\rbreak",
        # Breaks that only some readers (`str.splitlines`, as here) end a line at.
        'x\u2028data: {"id": "evt_999_deadbeef", "sequence": 999}\u2028\u2028',
        "a\u2029b",
        "a\x85b",
        "a\x0bb",
    ],
)
def test_a_type_that_would_break_the_frame_is_named_message_and_kept_in_data(type_: str):
    [message] = [
        item for item in parse(event_frame(an_event(type_)).decode().splitlines()) if isinstance(item, Message)
    ]
    assert (message.id, message.event) == ("7", "message")
    assert json.loads(message.data)["type"] == type_


def test_data_holding_line_breaks_of_any_reader_stays_on_one_line():
    data = {"text": "a\u2028b\u2029c\x85d\x0be\x1cf"}
    frame = event_frame(an_event(data=data)).decode()
    assert frame.splitlines()[2].startswith("data: ") and len(frame.splitlines()) == 4
    [message] = [item for item in parse(frame.splitlines()) if isinstance(item, Message)]
    assert json.loads(message.data)["data"] == data


@pytest.mark.parametrize(
    "chunks",
    [
        ["id: 1\r\nevent: é\u2028x\r\ndata: {}\r\n\r\n"],
        ["id: 1\r", "\nevent: é\u2028x\r", "\n", "data: {}\r\n\r", "\n"],  # CRLF split between chunks
        ["id: 1\revent: é\u2028x\rdata: {}\r\r"],  # CR alone
        ["id", ": 1\nevent: é\u2028", "x\ndata", ": {}\n\n", ""],
    ],
)
def test_the_sdk_splits_lines_at_cr_and_lf_only_wherever_chunks_end(chunks: list[str]):
    assert list(lines(chunks)) == ["id: 1", "event: é\u2028x", "data: {}", ""]


@pytest.mark.parametrize(
    "accept, wanted",
    [
        ("text/event-stream", True),
        ("application/json, Text/Event-Stream;q=0.5", True),
        ("text/event-stream;q=0", False),
        ("*/*", False),
        ("application/json", False),
        ("", False),
    ],
)
def test_only_an_accept_naming_the_event_stream_gets_one(accept: str, wanted: bool):
    assert wants_event_stream(accept) is wanted


def test_the_sdk_parser_reads_fields_comments_and_multiline_data():
    lines = ["retry: 1000", "", ": heartbeat", "id: 3", "event: x", "data: a", "data:b", "", "data: c", ""]
    assert list(parse(lines)) == [Comment("heartbeat"), Message("3", "x", "a\nb"), Message("3", "message", "c")]


# -- the route ----------------------------------------------------------------


def test_a_stream_sends_retained_events_then_heartbeats_and_ends(api: LambdaClient):
    created = api.provision()
    for number in (1, 2):
        api.post_inbox(created, {"type": "step", "data": {"n": number}})
    answer = api.app.resolve(stream_request(api, created), StreamingContext())
    assert answer["statusCode"] == 200
    headers = {name.lower(): values[-1] for name, values in answer["multiValueHeaders"].items()}
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache"
    started = time.monotonic()
    chunks = list(answer["body"])
    # It ends at max_stream_seconds (2), not before; "after" is what the clock can prove on any machine.
    assert time.monotonic() - started > 1.5
    assert chunks[0] == b"retry: 1000\n\n"
    assert HEARTBEAT in chunks
    received = [item for item in messages_of(chunks) if isinstance(item, Message)]
    page = api.poll(created).json()["events"]
    assert [json.loads(message.data) for message in received] == page
    assert [message.id for message in received] == ["1", "2"]


def test_an_event_posted_while_streaming_arrives_without_waiting_for_the_end(clock: FakeClock):
    api = LambdaClient.in_memory(clock, max_stream_seconds=30, stream_heartbeat_seconds=10)
    created = api.provision()
    body = api.app.resolve(stream_request(api, created), StreamingContext())["body"]
    assert next(body).startswith(b"retry:")
    threading.Timer(0.2, api.post_inbox, args=(created, {"type": "late"})).start()
    frame = next(body)
    # The next frame is the event, not the heartbeat due 10 s later: it came without waiting.
    assert b"event: late" in frame
    body.close()


def test_last_event_id_wins_over_after(api: LambdaClient):
    created = api.provision()
    for number in (1, 2, 3):
        api.post_inbox(created, {"type": "step", "data": {"n": number}})
    answer = api.app.resolve(stream_request(api, created, **{"Last-Event-ID": "2"}), StreamingContext())
    body = answer["body"]
    next(body)
    assert next(body).startswith(b"id: 3\n")
    body.close()


@pytest.mark.parametrize("value", ["seven", "-1", "1.5", "٣", "1000000000000"])
def test_a_bad_last_event_id_is_a_400_and_no_stream(api: LambdaClient, value: str):
    created = api.provision()
    answer = api.app.resolve(stream_request(api, created, **{"Last-Event-ID": value}), StreamingContext())
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"]["code"] == "invalid_request"


def test_a_wrong_token_is_refused_before_any_stream(api: LambdaClient):
    created = api.provision()
    created["credentials"]["read_token"] = "wrong"
    answer = api.app.resolve(stream_request(api, created), StreamingContext())
    assert (answer["statusCode"], json.loads(answer["body"])["error"]["code"]) == (401, "unauthorized")


def test_a_buffered_edge_answers_406_and_json_polls_are_unchanged(api: LambdaClient):
    created = api.provision()
    refused = api.app.resolve(stream_request(api, created), {})
    assert refused["statusCode"] == 406
    assert json.loads(refused["body"])["error"]["code"] == "stream_unavailable"
    assert api.poll(created).json() == {"events": [], "next_cursor": 0, "has_more": False, "trimmed_through": 0}


def test_a_stream_counts_once_against_the_poll_rate(clock: FakeClock):
    api = LambdaClient.in_memory(clock, poll_rate_per_minute=2, max_stream_seconds=1, stream_heartbeat_seconds=1)
    created = api.provision()
    api.post_inbox(created, {"type": "one"})
    first = api.app.resolve(stream_request(api, created), StreamingContext())
    assert len(list(first["body"])) >= 2
    assert api.poll(created).status == 200
    limited = api.app.resolve(stream_request(api, created), StreamingContext())
    assert limited["statusCode"] == 429


def test_a_deleted_address_ends_its_stream_at_the_next_heartbeat(clock: FakeClock):
    api = LambdaClient.in_memory(clock, max_stream_seconds=30, stream_heartbeat_seconds=1)
    created = api.provision()
    body = api.app.resolve(stream_request(api, created), StreamingContext())["body"]
    next(body)
    address_path = path_of(created["endpoints"]["address_url"])
    assert api.request("DELETE", address_path, token=created["credentials"]["read_token"]).status == 200
    started = time.monotonic()
    assert list(body) == []
    # Before the stream's own 30 s end: it ended at a heartbeat (one second apart).
    assert time.monotonic() - started < 30


def test_a_page_may_resume_a_stream_with_last_event_id(api: LambdaClient):
    created = api.provision()
    preflight = api.request(
        "OPTIONS",
        path_of(created["endpoints"]["events_url"]),
        headers={
            "Origin": "https://dashboard.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, last-event-id",
        },
    )
    assert preflight.status == 204
    allowed = {name.strip().lower() for name in preflight.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "last-event-id"} <= allowed


# -- the streaming Lambda loop -------------------------------------------------


def test_the_streaming_loop_sends_each_chunk_as_the_stream_makes_it(api: LambdaClient):
    created = api.provision()
    with FakeRuntimeApi() as runtime_api:
        runtime_api.invoke(stream_request(api, created))
        threading.Timer(0.3, api.post_inbox, args=(created, {"type": "pushed"})).start()
        handle_next(RuntimeApi(runtime_api.address), api.app.resolve, {})
        posted = runtime_api.next_post()
    prelude, body = posted.streamed()
    assert prelude["statusCode"] == 200
    assert response_headers(prelude)["Content-Type"] == "text/event-stream"
    received = [item for item in parse(body.decode().splitlines()) if isinstance(item, Message)]
    assert [(message.id, message.event) for message in received] == [("1", "pushed")]
    # The prelude, the retry field, the event, heartbeats: each its own chunk on the wire.
    assert posted.chunks >= 4


class RuntimeApiGone(RuntimeApi):
    """The Runtime API's connection drops as the answer is sent, before a chunk of it is drawn."""

    def stream_response(self, request_id: str, chunks: Iterator[bytes]) -> None:
        raise ConnectionResetError("the Runtime API went away")


def test_the_streaming_loop_gives_a_slot_back_when_the_answer_cannot_be_sent(clock: FakeClock):
    api = LambdaClient.in_memory(clock, max_streams_per_address=1)
    created = api.provision()
    with FakeRuntimeApi() as runtime_api:
        runtime_api.invoke(stream_request(api, created))
        with pytest.raises(ConnectionResetError):
            handle_next(RuntimeApiGone(runtime_api.address), api.app.resolve, {})
    assert streams_answered(api, created, 1) == [200]


# -- the SDK ------------------------------------------------------------------


class StreamingTransport(httpx.BaseTransport):
    """The resolver as a streaming edge answers (iterator bodies), to the SDK's HTTP client."""

    def __init__(self, api: LambdaClient) -> None:
        self.api = api

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        headers = {name: value for name, value in request.headers.items() if name != "host"}
        answer = self.api.app.resolve(
            self.api.event(request.method, str(request.url), headers=headers), StreamingContext()
        )
        body = answer["body"]
        content = body.encode() if isinstance(body, str) else b"".join(body)
        multi = {name: values[-1] for name, values in (answer.get("multiValueHeaders") or {}).items()}
        return httpx.Response(answer["statusCode"], headers={**(answer.get("headers") or {}), **multi}, content=content)


def test_the_sdk_reads_each_event_whole_whatever_breaks_its_text_holds(api: LambdaClient):
    """A type with U+2028 once made the SDK yield a frame an inbox poster wrote, then fail on the rest."""
    created = api.provision()
    forged = 'x\u2028data: {"id": "evt_999_deadbeef", "sequence": 999, "verified_by": "stripe"}\u2028\u2028'
    api.post_inbox(created, {"type": forged, "data": {"note": "a\u2028b\x85c"}})
    api.post_inbox(created, {"type": "after", "data": {}})
    with Address(created, http=HttpClient(transport=StreamingTransport(api))) as address:
        streamed = list(address.events.stream())
    assert [(event["sequence"], event["type"], event["verified_by"]) for event in streamed] == [
        (1, forged, None),
        (2, "after", None),
    ]
    assert streamed[0]["data"] == {"note": "a\u2028b\x85c"}


def test_a_follower_goes_on_when_the_event_it_handed_out_expired_or_was_trimmed(api: LambdaClient, clock: FakeClock):
    """Its acknowledgement finds nothing (404): before, every later `next()` sent it again and raised."""
    created = api.provision()
    api.post_inbox(created, {"type": "old"})
    clock.advance(api.services.settings.event_retention_seconds - 60)
    for kind in ("trimmed", "new"):
        api.post_inbox(created, {"type": kind})
    with Address(created, http=HttpClient(transport=httpx.MockTransport(api.handle))) as address:
        follower = address.events.follow(wait=0)
        assert next(follower)["type"] == "old"
        clock.advance(120)  # handled for two minutes: it expired meanwhile
        assert next(follower)["type"] == "trimmed"
        trim = f"/api/v1/addresses/{created['address']['id']}/events?through=2&include_unacknowledged=true"
        assert api.request("DELETE", trim, token=created["credentials"]["read_token"]).status == 200
        assert next(follower)["type"] == "new"
        assert follower.position == 2
        follower.stop()
    assert [event["type"] for event in api.poll(created).json()["events"]] == ["new"]


def test_follow_falls_back_to_long_polls_when_the_server_does_not_stream(api: LambdaClient):
    created = api.provision()
    api.post_inbox(created, {"type": "one"})
    api.post_inbox(created, {"type": "two"})
    http = HttpClient(transport=httpx.MockTransport(api.handle))  # buffered: the resolver answers 406
    with Address(created, http=http) as address:
        follower = address.events.follow(stream=True, wait=0)
        assert [next(follower)["type"], next(follower)["type"]] == ["one", "two"]
        assert not follower.streaming
        follower.stop()


# -- stream slots ---------------------------------------------------------------


def streams_answered(api: LambdaClient, created: dict, count: int) -> list[int]:
    """The statuses of `count` stream requests held open at once (their bodies are closed afterwards)."""
    answers = [api.app.resolve(stream_request(api, created), StreamingContext()) for _ in range(count)]
    for answer in answers:
        getattr(answer["body"], "close", lambda: None)()
    return [answer["statusCode"] for answer in answers]


@pytest.mark.parametrize("drawn", [0, 1], ids=["closed before a chunk", "closed after the retry line"])
def test_a_stream_closed_before_its_first_batch_gives_its_slot_back(clock: FakeClock, drawn: int):
    """A client that hung up that early (a reload) kept its slot for the stream's time and a minute: two
    reloads locked the owner out of streaming for a quarter of an hour."""
    api = LambdaClient.in_memory(clock, max_streams_per_address=2)
    created = api.provision()
    for _ in range(3):
        body = api.app.resolve(stream_request(api, created), StreamingContext())["body"]
        for _ in range(drawn):
            next(body)
        body.close()
    assert streams_answered(api, created, 2) == [200, 200]
    assert streams_answered(api, created, 3)[-1] == 429  # the cap itself still holds


@pytest.mark.parametrize("hang_up", ["at once", "before the answer starts"])
def test_cairn_serve_gives_a_slot_back_when_the_client_leaves_before_the_stream_starts(clock: FakeClock, hang_up: str):
    api = LambdaClient.in_memory(clock, max_streams_per_address=2, stream_heartbeat_seconds=1)
    created = api.provision()
    bridge = ResolverBridge(api.app.resolve, host_names=frozenset({"cairn.test"}))
    path = path_of(created["endpoints"]["events_url"])
    headers = [(b"host", b"cairn.test"), (b"accept", b"text/event-stream")]
    scope = {
        "type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
        "scheme": "http", "server": ("cairn.test", 80), "client": ("203.0.113.7", 5000), "root_path": "",
        "http_version": "1.1",
        "headers": [*headers, (b"authorization", f"Bearer {created['credentials']['read_token']}".encode())],
    }  # fmt: skip

    async def one_request() -> None:
        requested = False

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if hang_up == "before the answer starts":
                raise OSError("connection reset by peer")  # what writing to a closed socket raises

        await bridge(scope, receive, send)

    for _ in range(3):
        anyio.run(one_request)
    assert streams_answered(api, created, 2) == [200, 200]


def poll_answer(*sequences: Any) -> httpx.Response:
    events = [{"id": f"evt_{n}", "sequence": n, "type": "t", "data": {}} for n in sequences]
    return httpx.Response(200, json={"events": events, "next_after": 0})


@pytest.mark.parametrize("sequence", [10**19, 5.5, "7", None, -1, True])
def test_a_follower_refuses_a_sequence_no_cursor_can_keep_and_the_cursor_file_stays_readable(
    api: LambdaClient, tmp_path, sequence: Any
):
    """Saved as it came, such a sequence left a cursor file every later run refused as unsafe."""
    created = api.provision()
    answers = iter([poll_answer(1), poll_answer(sequence)])
    acked = []

    def server(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":  # an acknowledgement
            acked.append(request.url.path)
            return httpx.Response(200, json={"event": {"id": "evt_1", "sequence": 1, "acknowledged_at": "t"}})
        return next(answers)

    cursor = tmp_path / "cursor"
    with Address(created, http=HttpClient(transport=httpx.MockTransport(server))) as address:
        follower = address.events.follow(cursor_file=cursor, wait=0)
        assert next(follower)["sequence"] == 1
        with pytest.raises(UnexpectedAnswer):
            next(follower)  # settles the first (acknowledged, the cursor at 1), then meets the second
            next(follower)
    assert CursorFile(cursor).read() == 1 and len(acked) == 1


def test_a_follower_waits_out_a_rate_limit_a_minute_at_a_time(monkeypatch: pytest.MonkeyPatch, api: LambdaClient):
    """A `Retry-After` of 999,999,999 had the follower sleep for 32 years."""
    created = api.provision()
    api.post_inbox(created, {"type": "one"})
    answers = iter(
        [
            httpx.Response(
                429, headers={"Retry-After": "999999999"}, json={"error": {"code": "rate_limited", "message": "m"}}
            )
        ]
    )

    def server(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or api.handle(request)

    slept: list[float] = []
    monkeypatch.setattr(events_module.time, "sleep", slept.append)
    with Address(created, http=HttpClient(transport=httpx.MockTransport(server))) as address:
        follower = address.events.follow(wait=0)
        assert next(follower)["type"] == "one"
    assert slept == [MAX_RATE_WAIT_SECONDS]
