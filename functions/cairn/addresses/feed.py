"""Read the ordered event feed of an address: poll, long-poll, watch (a stream), acknowledge."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack

from msgspec.structs import replace

from cairn import credentials
from cairn.addresses.access import admit, authenticate, require_well_formed
from cairn.addresses.models import Acknowledged, AddressRecord, Event, FeedPage, TrimResult, sequence_of
from cairn.addresses.ports import AddressStore, RateSpent, ReadLeases, TrimRequest, Waiter
from cairn.clock import Clock
from cairn.errors import NotFound, RateLimited, TooManyHeldReads
from cairn.settings import Settings

# The kinds of held read (`ReadLeases`), each capped per address by its own setting.
STREAMS = "streams"
WAITS = "waits"
# A lease outlives its read by this much, so a slow start or end never frees a slot still in use;
# it only matters for a holder that died without releasing.
_LEASE_MARGIN_SECONDS = 60


def _nothing_held() -> None:
    """What gives back a read that was not counted."""


class EventStream(Iterator[list[Event]]):
    """The batches of one event stream (`Feed.watch`), holding one of the address's stream slots.

    The slot goes back when the batches end or the stream is closed, begun or
    not: a client that hangs up before the first batch is drawn (a reload, a
    dropped connection) must not keep a slot until its lease runs out.
    """

    def __init__(self, batches: Generator[list[Event], None, None], *, release: Callable[[], None]) -> None:
        self._batches = batches
        self._release: Callable[[], None] | None = release

    def __next__(self) -> list[Event]:
        try:
            return next(self._batches)
        except BaseException:  # StopIteration or a failure: the stream is over either way
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            try:
                self._batches.close()
            finally:
                release()


class Feed:
    def __init__(
        self, table: AddressStore, leases: ReadLeases, waiter: Waiter, settings: Settings, clock: Clock
    ) -> None:
        self._table = table
        self._leases = leases
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
        copies: int = 1,
        client: str | None = None,
    ) -> FeedPage:
        """Events after `after`; with `wait`, block until one exists or time runs out.

        A long-poll counts once against the per-address poll rate. The page's
        budget is divided by `copies`, what one answer may cost in pages: an
        MCP tool result carries the page twice, as structured content and as
        JSON text in a string, where each quote and backslash is escaped once
        more, so up to three times the page as the REST route sends it. A poll
        that waits also holds one of `client`'s reads, when a caller names it.
        """
        record = self.admit_read(address_id, read_token)
        trimmed_through = record.trimmed_through
        deadline = time.monotonic() + min(wait, self._settings.max_wait_seconds)
        with self._waiter.subscribe(address_id) as subscription, ExitStack() as held:
            waiting = False
            while True:
                start = max(after, trimmed_through)
                page = self._page(address_id, start, limit, copies)
                if page.events and page.events[0].sequence > start + 1:
                    # A gap: expired events, or a trim since the head was read. Only the head tells which.
                    trimmed_through = self._trimmed_through(address_id, trimmed_through)
                remaining = deadline - time.monotonic()
                if page.events or remaining <= 0:
                    return replace(page, trimmed_through=trimmed_through)
                if not waiting:
                    # Only a poll that will wait holds a slot; one answered at once costs none.
                    cap = self._settings.max_waiting_polls_per_address
                    held.callback(self._hold(address_id, WAITS, seconds=remaining, cap=cap, client=client))
                    waiting = True
                subscription.wait(remaining)

    def trim(
        self, address_id: str, read_token: str | None, *, through: int, include_unacknowledged: bool = False
    ) -> TrimResult:
        """Remove the oldest events up to `through`, freeing their slots; sequences are never reused.

        Only acknowledged events go, unless `include_unacknowledged`: the
        trim stops before the first live event not yet acknowledged, so
        the feed always stays one run of sequences after `trimmed_through`.
        """
        now = self._clock()
        record = authenticate(self._table, address_id, read_token, now=now)
        return self._table.trim(
            TrimRequest(
                address_id,
                record.read_token_digest,
                floor=record.trimmed_through,
                last=record.last_sequence,
                through=min(through, record.last_sequence),
                include_unacknowledged=include_unacknowledged,
                now=now,
            )
        )

    def _trimmed_through(self, address_id: str, known: int) -> int:
        record = self._table.load(address_id)
        return known if record is None else max(known, record.trimmed_through)

    def watch(
        self, address_id: str, read_token: str | None, *, after: int, limit: int, client: str | None = None
    ) -> EventStream:
        """Events after `after` as they commit, for one stream of `max_stream_seconds`.

        Checks the token and counts once against the poll rate now, so a
        refusal is an ordinary error answer before any stream starts. The
        iterator then yields each batch of new events (up to `limit`, within
        the page budget), and an empty batch whenever
        `stream_heartbeat_seconds` pass without one, so the caller can keep
        the connection alive. It waits with the long-poll's waiter, never in
        a busy loop, and ends when the time is up or, checked at each
        heartbeat, the address is gone. Closing it gives its slot back, and
        the one it holds of `client`'s, when a caller names it.
        """
        self.admit_read(address_id, read_token)
        settings = self._settings
        release = self._hold(
            address_id,
            STREAMS,
            seconds=settings.max_stream_seconds,
            cap=settings.max_streams_per_address,
            client=client,
        )
        return EventStream(self._batches(address_id, read_token, after, limit), release=release)

    def _hold(self, address_id: str, kind: str, *, seconds: float, cap: int, client: str | None) -> Callable[[], None]:
        """One of the address's `cap` slots of `kind`, and one of `client`'s (when the settings cap clients),
        or `TooManyHeldReads`; returns what gives them back."""
        lease = uuid.uuid4().hex
        now = self._clock()
        until = now + seconds + _LEASE_MARGIN_SECONDS
        retry_after = self._leases.hold(address_id, kind, lease, until=until, cap=cap, now=now)
        if retry_after is not None:
            what = "event streams" if kind == STREAMS else "waiting polls"
            raise TooManyHeldReads(f"At most {cap} {what} per address at once.", retry_after=retry_after)

        def release_slot() -> None:
            self._leases.release(address_id, kind, lease)

        try:
            release_client = self._hold_for_client(client, lease, until=until, now=now)
        except BaseException:
            release_slot()
            raise

        def release() -> None:
            try:
                release_slot()
            finally:
                release_client()

        return release

    def hold_client_read(self, client: str | None, *, seconds: float) -> Callable[[], None]:
        """One of `client`'s held reads for up to `seconds`, for a read that holds no slot of an address (an
        attachment being sent), or `TooManyHeldReads`; returns what gives it back."""
        now = self._clock()
        return self._hold_for_client(client, uuid.uuid4().hex, until=now + seconds + _LEASE_MARGIN_SECONDS, now=now)

    def _hold_for_client(self, client: str | None, lease: str, *, until: float, now: float) -> Callable[[], None]:
        per_client = self._settings.max_held_reads_per_client
        if client is None or not per_client:
            return _nothing_held
        retry_after = self._leases.hold_for_client(client, lease, until=until, cap=per_client, now=now)
        if retry_after is not None:
            raise TooManyHeldReads(
                f"At most {per_client} event streams, waiting polls and downloads per client at once, "
                "across its addresses.",
                retry_after=retry_after,
            )
        return lambda: self._leases.release_for_client(client, lease)

    def _batches(
        self, address_id: str, read_token: str | None, after: int, limit: int
    ) -> Generator[list[Event], None, None]:
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

    def _page(self, address_id: str, after: int, limit: int, copies: int = 1) -> FeedPage:
        return self._table.list_events(
            address_id, after=after, limit=limit, now=self._clock(), max_bytes=self._settings.max_page_bytes // copies
        )

    def acknowledge(self, address_id: str, read_token: str | None, event_id: str) -> Acknowledged:
        """Mark an event handled; repeating it keeps the first time.

        The token is a condition of the acknowledgement's own write, so
        nothing is read first; an id no event can have still meets the one
        refusal before `NotFound`.
        """
        now = self._clock()
        sequence = sequence_of(event_id)
        if sequence is None or not read_token:
            authenticate(self._table, address_id, read_token, now=now)
            raise NotFound("No retained event with this id.", event_id=event_id)
        require_well_formed(address_id)
        digest = credentials.digest(read_token)
        event = self._table.acknowledge(address_id, sequence, event_id, now=now, read_token_digest=digest)
        if event is None:
            raise NotFound("No retained event with this id.", event_id=event_id)
        return event

    def admit_read(self, address_id: str, read_token: str | None) -> AddressRecord:
        """The live address the token opens, with one use of its read rate counted in the same write.

        Polls, streams, describes and attachment downloads share the rate
        (`poll_rate_per_minute`): every read that costs storage counts. A
        refusal counts nothing, and a spent rate is told only to the owner.
        """
        require_well_formed(address_id)
        now = self._clock()
        if not read_token:
            admit(None, read_token, now=now)  # the one refusal, after the same work
        limit = self._settings.poll_rate_per_minute
        try:
            return self._table.admit_read(address_id, credentials.digest(read_token or ""), limit=limit, now=now)
        except RateSpent as spent:
            raise RateLimited(f"At most {limit} polls per address per minute.", retry_after=spent.retry_after) from None
