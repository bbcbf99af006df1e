"""Server-sent events of the feed: framing, the route, the streaming Lambda loop, the SDK's reader. In memory."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from cairn.addresses.models import Event
from cairn.api.sse import HEARTBEAT, event_frame, wants_event_stream
from cairn.client import Address, HttpClient
from cairn.client.sse import Comment, Message, parse
from cairn.entrypoints.streaming import RuntimeApi, handle_next
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


@pytest.mark.parametrize("type_", ["a\nretry: 1", "a\r\nid: 99", "line\rbreak"])
def test_a_type_that_would_break_the_frame_is_named_message_and_kept_in_data(type_: str):
    [message] = [
        item for item in parse(event_frame(an_event(type_)).decode().splitlines()) if isinstance(item, Message)
    ]
    assert (message.id, message.event) == ("7", "message")
    assert json.loads(message.data)["type"] == type_


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


# -- the SDK ------------------------------------------------------------------


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
