"""An address's event feed: poll, long-poll, stream, acknowledge, and follow from a saved cursor."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Generator
from pathlib import Path
from typing import Any

from cairn.client import sse
from cairn.client.cursor import CursorFile, feed_position
from cairn.client.http import HttpClient
from cairn.client.models import Ack, Event, Page
from cairn.client.paths import segment
from cairn.errors import NotFound, RateLimited, StreamUnavailable

MAX_WAIT = 25
EVENT_STREAM = "text/event-stream"
# Longer than the server's heartbeat interval (15 s by default): a silent stream beyond it is broken.
STREAM_IDLE_SECONDS = 25
# The longest a follower sleeps on one `Retry-After` (a rate window is a minute).
MAX_RATE_WAIT_SECONDS = 60.0


class Events:
    def __init__(self, http: HttpClient, events_url: str, read_token: str) -> None:
        self._http = http
        self._url = events_url
        self._token = read_token

    def poll(self, *, after: int = 0, wait: float = 0, limit: int | None = None) -> Page:
        """Events after sequence `after`, waiting up to `wait` seconds (at most 25) for the first.

        Reading changes nothing: pass `next_cursor` as the next `after`.
        """
        params: dict[str, Any] = {"after": after, "wait": wait}
        if limit is not None:
            params["limit"] = limit
        page: Page = self._http.request("GET", self._url, token=self._token, params=params, wait=wait).json()
        return page

    def stream(self, *, after: int = 0) -> Generator[Event, None, None]:
        """Events after sequence `after`, pushed by the server as they commit (server-sent events).

        One connection: the iterator ends when the server ends the stream
        (after its configured time); open another from the last sequence
        seen. Raises `StreamUnavailable` when the server does not stream (an
        AgentAddress server, or a buffered deployment): long-poll instead.
        """
        headers = {"Accept": EVENT_STREAM}
        with self._http.stream(
            self._url, token=self._token, params={"after": after}, headers=headers, idle=STREAM_IDLE_SECONDS
        ) as response:
            if response.headers.get("content-type", "").partition(";")[0].strip() != EVENT_STREAM:
                raise StreamUnavailable("The server answered the stream request with a page, not a stream.")
            for item in sse.parse(sse.lines(response.iter_text())):
                if isinstance(item, sse.Message):
                    yield json.loads(item.data)

    def ack(self, event: Event | str) -> Ack:
        """Mark an event (or event id) handled; repeating it keeps the first time."""
        event_id = event if isinstance(event, str) else event["id"]
        url = f"{self._url}/{segment(event_id, 'event id')}/ack"
        acked: Ack = self._http.request("POST", url, token=self._token).json()
        return acked

    def follow(
        self,
        *,
        cursor_file: str | Path | None = None,
        after: int = 0,
        wait: float = MAX_WAIT,
        limit: int | None = None,
        stream: bool = False,
    ) -> Follower:
        """Every event after the cursor, each once, long-polling for more, until `stop()`.

        With `cursor_file` (an owner-only file) the cursor outlives the
        process and a later `follow` resumes after the last handled event;
        without it the cursor starts at `after`. With `stream=True` new
        events arrive over server-sent events instead of long-polls (one
        connection for many events, reopened from the cursor when the server
        ends it), falling back to long-polls if the server does not stream.
        See `Follower` for when an event counts as handled.
        """
        cursor = CursorFile(cursor_file) if cursor_file is not None else None
        position = max(after, cursor.read()) if cursor is not None else after
        return Follower(self, cursor, position, wait=wait, limit=limit, stream=stream)


class Follower:
    """The iterator `Events.follow` returns.

    An event is acknowledged, and the cursor moved past it, when the loop
    asks for the next one: that is, once the caller's block for it finished
    without raising. An exception in the block leaves the event
    unacknowledged and the cursor before it, so the next `follow` delivers it
    again; so does `break`. To end the loop after handling an event, call
    `stop()` instead of breaking out.
    """

    def __init__(
        self,
        events: Events,
        cursor: CursorFile | None,
        position: int,
        *,
        wait: float,
        limit: int | None,
        stream: bool = False,
    ) -> None:
        self._events = events
        self._cursor = cursor
        self.position = position
        self._wait = wait
        self._limit = limit
        self._fetched: deque[Event] = deque()
        self._current: Event | None = None
        self._stopped = False
        self.streaming = stream
        self._stream: Generator[Event, None, None] | None = None

    def __iter__(self) -> Follower:
        return self

    def __next__(self) -> Event:
        self._settle()
        if self._stopped:
            raise StopIteration
        while not self._fetched:
            try:
                self._fetched.extend(self._next_events())
            except RateLimited as limited:
                # A follower is long-lived: waiting out the rate limit is its job, not the caller's; a window
                # is a minute, so a longer wait asked for is waited a minute at a time.
                time.sleep(min(limited.retry_after, MAX_RATE_WAIT_SECONDS))
        self._current = self._fetched.popleft()
        return self._current

    def _next_events(self) -> list[Event]:
        """The next events after the cursor: from the open stream, or from one long-poll."""
        if not self.streaming:
            return self._events.poll(after=self.position, wait=self._wait, limit=self._limit)["events"]
        if self._stream is None:
            # Events are handed out one at a time, so the cursor is the last one the stream gave.
            self._stream = self._events.stream(after=self.position)
        try:
            return [next(self._stream)]
        except StopIteration:
            self._stream = None  # the server ended this stream; the next call opens another
        except StreamUnavailable:
            self._stream, self.streaming = None, False
        return []

    def stop(self) -> None:
        """Acknowledge the event being handled and end the loop after it."""
        self._settle()
        self._stopped = True
        self.close()

    def close(self) -> None:
        """Close the open stream, if any (`stop()` does it; so does leaving the loop with `break`, eventually)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _settle(self) -> None:
        """Acknowledge the event handed out last, then move the cursor past it."""
        if self._current is None:
            return
        position = feed_position(self._current["sequence"])
        try:
            self._events.ack(self._current)
        except NotFound:
            # Expired or trimmed while it was handled: nothing is left to acknowledge, and the follower goes on.
            pass
        self.position = position
        if self._cursor is not None:
            self._cursor.advance(self.position)
        self._current = None
