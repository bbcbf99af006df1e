"""An address's event feed: poll, long-poll, acknowledge, and follow from a saved cursor."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cairn.client.cursor import CursorFile
from cairn.client.http import HttpClient
from cairn.client.models import Ack, Event, Page
from cairn.errors import RateLimited

MAX_WAIT = 25


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
        return self._http.request("GET", self._url, token=self._token, params=params, wait=wait).json()

    def ack(self, event: Event | str) -> Ack:
        """Mark an event (or event id) handled; repeating it keeps the first time."""
        event_id = event if isinstance(event, str) else event["id"]
        return self._http.request("POST", f"{self._url}/{quote(event_id, safe='')}/ack", token=self._token).json()

    def follow(
        self,
        *,
        cursor_file: str | Path | None = None,
        after: int = 0,
        wait: float = MAX_WAIT,
        limit: int | None = None,
    ) -> Follower:
        """Every event after the cursor, each once, long-polling for more, until `stop()`.

        With `cursor_file` (an owner-only file) the cursor outlives the
        process and a later `follow` resumes after the last handled event;
        without it the cursor starts at `after`. See `Follower` for when an
        event counts as handled.
        """
        cursor = CursorFile(cursor_file) if cursor_file is not None else None
        position = max(after, cursor.read()) if cursor is not None else after
        return Follower(self, cursor, position, wait=wait, limit=limit)


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
        self, events: Events, cursor: CursorFile | None, position: int, *, wait: float, limit: int | None
    ) -> None:
        self._events = events
        self._cursor = cursor
        self.position = position
        self._wait = wait
        self._limit = limit
        self._fetched: deque[Event] = deque()
        self._current: Event | None = None
        self._stopped = False

    def __iter__(self) -> Follower:
        return self

    def __next__(self) -> Event:
        self._settle()
        if self._stopped:
            raise StopIteration
        while not self._fetched:
            try:
                page = self._events.poll(after=self.position, wait=self._wait, limit=self._limit)
            except RateLimited as limited:
                # A follower is long-lived: waiting out the rate limit is its job, not the caller's.
                time.sleep(limited.retry_after)
                continue
            self._fetched.extend(page["events"])
        self._current = self._fetched.popleft()
        return self._current

    def stop(self) -> None:
        """Acknowledge the event being handled and end the loop after it."""
        self._settle()
        self._stopped = True

    def _settle(self) -> None:
        """Acknowledge the event handed out last, then move the cursor past it."""
        if self._current is None:
            return
        self._events.ack(self._current)
        self.position = self._current["sequence"]
        if self._cursor is not None:
            self._cursor.advance(self.position)
        self._current = None
