"""Read the ordered event feed of an address: poll, long-poll, watch (a stream), acknowledge."""

from __future__ import annotations

import time
from collections.abc import Iterator

from cairn.addresses.access import authenticate
from cairn.addresses.models import Event, FeedPage, sequence_of
from cairn.addresses.ports import AddressStore, RateLimiter, Waiter
from cairn.clock import Clock
from cairn.errors import NotFound, RateLimited
from cairn.settings import Settings


class Feed:
    def __init__(
        self, table: AddressStore, limiter: RateLimiter, waiter: Waiter, settings: Settings, clock: Clock
    ) -> None:
        self._table = table
        self._limiter = limiter
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def poll(
        self,
        address_id: str,
        read_token: str | None,
        *,
        after: int,
        wait: float,
        limit: int,
        nesting: int = 1,
    ) -> FeedPage:
        """Events after `after`; with `wait`, block until one exists or time runs out.

        A long-poll counts once against the per-address poll rate. `nesting`
        is how many times the answer's JSON is written inside another JSON
        string (MCP puts the page in a tool result: 2); each doubles the
        escaping, so the page budget is divided by it.
        """
        authenticate(self._table, address_id, read_token, now=self._clock())
        self.count_poll(address_id)
        deadline = time.monotonic() + min(wait, self._settings.max_wait_seconds)
        with self._waiter.subscribe(address_id) as subscription:
            while True:
                page = self._page(address_id, after, limit, nesting)
                remaining = deadline - time.monotonic()
                if page.events or remaining <= 0:
                    return page
                subscription.wait(remaining)

    def watch(self, address_id: str, read_token: str | None, *, after: int, limit: int) -> Iterator[list[Event]]:
        """Events after `after` as they commit, for one stream of `max_stream_seconds`.

        Checks the token and counts once against the poll rate now, so a
        refusal is an ordinary error answer before any stream starts. The
        iterator then yields each batch of new events (up to `limit`, within
        the page budget), and an empty batch whenever
        `stream_heartbeat_seconds` pass without one, so the caller can keep
        the connection alive. It waits with the long-poll's waiter, never in
        a busy loop, and ends when the time is up or, checked at each
        heartbeat, the address is gone.
        """
        authenticate(self._table, address_id, read_token, now=self._clock())
        self.count_poll(address_id)
        return self._follow(address_id, read_token, after, limit)

    def _follow(self, address_id: str, read_token: str | None, after: int, limit: int) -> Iterator[list[Event]]:
        settings = self._settings
        deadline = time.monotonic() + settings.max_stream_seconds
        heartbeat = settings.stream_heartbeat_seconds
        beat = time.monotonic() + heartbeat
        while True:
            # Subscribed before each read, as a long-poll is, so no commit slips between them.
            with self._waiter.subscribe(address_id) as subscription:
                while not (page := self._page(address_id, after, limit)).events:
                    moment = time.monotonic()
                    if moment >= deadline:
                        return
                    if moment >= beat:
                        # Deleted or expired addresses stop streaming ("expired means gone").
                        authenticate(self._table, address_id, read_token, now=self._clock())
                        yield []
                        beat = time.monotonic() + heartbeat
                        continue
                    subscription.wait(min(deadline, beat) - moment)
            yield page.events
            after = page.events[-1].sequence
            beat = time.monotonic() + heartbeat
            if time.monotonic() >= deadline:
                return

    def _page(self, address_id: str, after: int, limit: int, nesting: int = 1) -> FeedPage:
        return self._table.list_events(
            address_id, after=after, limit=limit, now=self._clock(), max_bytes=self._settings.max_page_bytes // nesting
        )

    def acknowledge(self, address_id: str, read_token: str | None, event_id: str) -> Event:
        """Mark an event handled; repeating it keeps the first time."""
        now = self._clock()
        authenticate(self._table, address_id, read_token, now=now)
        sequence = sequence_of(event_id)
        event = None if sequence is None else self._table.acknowledge(address_id, sequence, event_id, now=now)
        if event is None:
            raise NotFound("No retained event with this id.", event_id=event_id)
        return event

    def count_poll(self, address_id: str) -> None:
        """One use of the per-address poll rate; polls and attachment downloads share it."""
        limit = self._settings.poll_rate_per_minute
        retry_after = self._limiter.hit("poll", address_id, limit=limit, now=self._clock())
        if retry_after is not None:
            raise RateLimited(f"At most {limit} polls per address per minute.", retry_after=retry_after)
