"""Server-sent events of the feed on `cairn serve`, over real HTTP, as a browser or the SDK reads them."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cairn.client import Address
from cairn.client.sse import Comment, Message, parse
from cairn.tls import verified_context
from tests.support.serve import ServeProcess

HEARTBEAT_SECONDS = 1
STREAM_SECONDS = 6


@pytest.fixture
def streaming(dynamodb_local, streamed_table: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """`cairn serve` with a one-second heartbeat and six-second streams, so a test sees both."""
    env = {
        "CAIRN_STREAM_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "CAIRN_MAX_STREAM_SECONDS": str(STREAM_SECONDS),
    }
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server:
        yield server


@pytest.fixture
def address(streaming: ServeProcess) -> Iterator[Address]:
    with Address.provision(streaming.base_url, task_id="sse-test", expires_in=3600) as created:
        yield created


class Reader:
    """One SSE connection read on a thread: each message or comment lands in `received` as it arrives."""

    def __init__(self, address: Address, *, after: int = 0, last_event_id: int | None = None) -> None:
        self.received: queue.Queue[Message | Comment | None] = queue.Queue()
        self.status: int | None = None
        self.content_type = ""
        self._response: httpx.Response | None = None
        headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {address.read_token}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self._client = httpx.Client(timeout=httpx.Timeout(10.0), verify=verified_context())
        self._request = self._client.build_request("GET", address.events_url, params={"after": after}, headers=headers)
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self._opened.wait(10), "the stream never opened"

    def _read(self) -> None:
        try:
            response = self._response = self._client.send(self._request, stream=True)
            self.status, self.content_type = response.status_code, response.headers.get("content-type", "")
            self._opened.set()
            for item in parse(response.iter_lines()):
                self.received.put(item)
        except httpx.HTTPError:
            pass  # closed by the test
        finally:
            self._opened.set()
            self.received.put(None)

    def next_message(self, timeout: float = 10.0) -> Message:
        message = self.next_message_or_end(timeout)
        assert message is not None, "the stream ended"
        return message

    def next_message_or_end(self, timeout: float = 10.0) -> Message | None:
        """The next event's message, or None once the server has ended the stream."""
        while True:
            item = self.received.get(timeout=timeout)
            if item is None or isinstance(item, Message):
                return item

    def close(self) -> None:
        """Hang up at once, as a client that goes away does."""
        if self._response is not None:
            # Closing the response from this thread leaves the reading thread blocked in its read until
            # the read timeout; shutting the socket down ends that read and tells the server now.
            stream = self._response.extensions.get("network_stream")
            connection = stream.get_extra_info("socket") if stream is not None else None
            if connection is not None:
                with contextlib.suppress(OSError):  # already closed: the server ended the stream
                    connection.shutdown(socket.SHUT_RDWR)
            self._response.close()
        self._client.close()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the stream's reader did not end"


def post(address: Address, number: int) -> int:
    reply = address.inbox.post({"type": f"step.{number}", "data": {"n": number}}, idempotency_key=f"k{number}")
    return reply["event"]["sequence"]


def test_each_event_arrives_as_it_is_posted_framed_as_in_a_page(address: Address):
    reader = Reader(address)
    try:
        assert reader.status == 200 and reader.content_type.startswith("text/event-stream")
        for number in range(1, 6):
            sequence = post(address, number)
            message = reader.next_message(timeout=5)  # before the next post: pushed, not gathered at the end
            assert (message.id, message.event) == (str(sequence), f"step.{number}")
            assert json.loads(message.data)["data"] == {"n": number}
    finally:
        reader.close()
    page = address.events.poll(after=0)
    streamed = Reader(address)  # a new stream from the start replays the retained events
    try:
        assert [json.loads(streamed.next_message().data) for _ in page["events"]] == page["events"]
    finally:
        streamed.close()


def test_a_reconnect_with_last_event_id_loses_nothing(address: Address):
    total = 60
    posted: list[int] = []

    def poster() -> None:
        for number in range(1, total + 1):
            posted.append(post(address, number))
            time.sleep(0.01)

    writer = threading.Thread(target=poster)
    writer.start()
    seen: list[int] = []
    connections = 0
    try:
        while len(seen) < total:
            # A few events per connection, then hang up mid-stream, as a flaky network would.
            reader = Reader(address, last_event_id=seen[-1] if seen else None)
            connections += 1
            try:
                for _ in range(7):
                    if len(seen) == total or (message := reader.next_message_or_end()) is None:
                        break  # done, or the server ended the stream: reconnect, as EventSource does
                    seen.append(int(message.id or 0))
            finally:
                reader.close()
    finally:
        writer.join(30)
    assert seen == posted == list(range(1, total + 1))
    assert connections >= total // 7


def test_an_idle_stream_sends_heartbeats_then_ends_after_the_configured_time(address: Address):
    started = time.monotonic()
    reader = Reader(address)
    heartbeats = 0
    try:
        while (item := reader.received.get(timeout=STREAM_SECONDS + 10)) is not None:
            heartbeats += isinstance(item, Comment) and item.text == "heartbeat"
    finally:
        reader.close()
    lasted = time.monotonic() - started
    assert STREAM_SECONDS - 0.5 <= lasted < STREAM_SECONDS + 6
    assert heartbeats >= 2


def test_refusals_are_json_errors_before_any_stream(streaming: ServeProcess, address: Address):
    with streaming.client() as client:
        stream = {"Accept": "text/event-stream"}
        wrong = client.get(address.events_url, headers={**stream, "Authorization": "Bearer nope"})
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "unauthorized")
        bad = client.get(
            address.events_url,
            headers={**stream, "Authorization": f"Bearer {address.read_token}", "Last-Event-ID": "seven"},
        )
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")


def test_the_sdk_follows_over_the_stream_across_server_ended_streams(address: Address):
    follower = address.events.follow(stream=True)
    total = 8
    got: list[int] = []
    try:
        for number in range(1, total + 1):
            post(address, number)
            if number == total // 2:
                time.sleep(STREAM_SECONDS + 1)  # the server ends the first stream meanwhile
            got.append(next(follower)["sequence"])
        assert follower.streaming
    finally:
        follower.stop()
    assert got == list(range(1, total + 1))
    # Every event handed out and finished was acknowledged.
    assert all(event["acknowledged_at"] for event in address.events.poll(after=0)["events"])


def test_every_one_of_many_concurrent_streams_gets_every_event_in_order(dynamodb_local, streamed_table, tmp_path):
    # Every stream outlasts the test, and the address may hold all twenty at once.
    env = {"CAIRN_MAX_STREAM_SECONDS": "120", "CAIRN_MAX_STREAMS_PER_ADDRESS": "20"}
    with (
        ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server,
        Address.provision(server.base_url, expires_in=3600) as address,
    ):
        readers = [Reader(address) for _ in range(20)]
        try:
            sequences = [post(address, number) for number in range(1, 6)]
            for reader in readers:
                assert [int(reader.next_message().id or 0) for _ in sequences] == sequences
            assert address.inbox.post({"type": "still.answering"})["event"]["sequence"] == 6
        finally:
            for reader in readers:
                reader.close()


def refused_stream(address: Address) -> httpx.Response:
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {address.read_token}"}
    with httpx.Client(timeout=10, verify=verified_context()) as client:
        return client.get(address.events_url, headers=headers)


def test_an_address_holds_at_most_its_streams_and_a_closed_one_frees_its_slot(streaming: ServeProcess):
    """Five streams by default: the sixth is a 429 with Retry-After, other addresses are untouched,
    and a client that hangs up gives its slot back."""
    with (
        Address.provision(streaming.base_url, expires_in=3600) as address,
        Address.provision(streaming.base_url, expires_in=3600) as other,
    ):
        readers = [Reader(address) for _ in range(5)]
        try:
            assert [reader.status for reader in readers] == [200] * 5
            refused = refused_stream(address)
            assert (refused.status_code, refused.json()["error"]["code"]) == (429, "too_many_held_reads")
            assert int(refused.headers["Retry-After"]) >= 1
            elsewhere = Reader(other)
            assert elsewhere.status == 200, "another address's streams are its own"
            elsewhere.close()
            readers.pop().close()
            # The server notices the hang-up at its next write (a heartbeat, every second here).
            deadline = time.monotonic() + 30
            while (reader := Reader(address)).status != 200 and time.monotonic() < deadline:
                reader.close()
                time.sleep(0.2)
            readers.append(reader)
            assert reader.status == 200, "the closed stream's slot was not given back"
            post(address, 1)
            assert all(int(reader.next_message().id or 0) == 1 for reader in readers)
        finally:
            for reader in readers:
                reader.close()


def test_an_address_holds_at_most_its_waiting_polls(streaming: ServeProcess, dynamodb_local, streamed_table: str):
    """Ten waiting long-polls by default: the eleventh is a 429 before it waits; a poll that need not
    wait is never refused, and the slots come back when the polls return."""
    from cairn.dynamodb.client import make_client
    from cairn.settings import Settings

    table = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    with (
        Address.provision(streaming.base_url, expires_in=3600) as address,
        streaming.client() as client,
    ):
        auth = {"Authorization": f"Bearer {address.read_token}"}

        def long_poll() -> httpx.Response:
            return client.get(address.events_url, params={"wait": 20}, headers=auth)

        def held() -> int:
            head = table.get_item(
                TableName=streamed_table, Key={"pk": {"S": f"A#{address.id}"}, "sk": {"S": "META"}}, ConsistentRead=True
            )["Item"]
            return len(head.get("held_waits", {}).get("M", {}))

        results: list[httpx.Response] = []
        pollers = [threading.Thread(target=lambda: results.append(long_poll())) for _ in range(10)]
        for poller in pollers:
            poller.start()
        deadline = time.monotonic() + 30
        while held() < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert held() == 10
        refused = long_poll()
        assert (refused.status_code, refused.json()["error"]["code"]) == (429, "too_many_held_reads")
        assert int(refused.headers["Retry-After"]) >= 1
        post(address, 1)
        for poller in pollers:
            poller.join(30)
        assert [[event["sequence"] for event in reply.json()["events"]] for reply in results] == [[1]] * 10
        assert held() == 0, "every returned poll gave its slot back"
        assert long_poll().json()["events"][0]["sequence"] == 1, "a poll with events to answer takes no slot"
