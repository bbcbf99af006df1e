"""`cairn serve`'s part of Lambda's for wake-ups: read the table's stream, sweep due retries.

In AWS an event source mapping reads the stream and a schedule runs the
sweep; here two threads do the same with DynamoDB Local's own stream (the
Streams API: DescribeStream, GetShardIterator, GetRecords, following shard
splits), and hand everything to the very same `Dispatcher` and `Sweep`.
The reader does not wait for the deliveries it starts: they run on a pool of
their own, so a slow target never holds up the next records, whichever
addresses they are for.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from cairn.dynamodb.items import error_code
from cairn.dynamodb.stream_records import event_notices
from cairn.wakeups.dispatcher import SENDER_THREADS, Dispatcher, Sweep

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger(__name__)

# How long the reader rests after an empty read: the first rest, doubled after each empty read up to the
# longest. An idle server reading ten times a second spent about 6 % of a core on it (with DynamoDB
# Local's share); an append committed in this process ends the rest at once (`read_soon`), so the
# longest rest only bounds the wake-up latency of records written by another process.
POLL_SECONDS = 0.1
IDLE_POLL_SECONDS = 1.0
# And after a read that found records. Reading again at once would, under a steady flow of posts, make
# a GetRecords call (to DynamoDB Local, on the same cores) for almost every post: a short pause lets
# records gather, so a read takes many, at the price of up to this much more wake-up latency under load.
BUSY_PAUSE_SECONDS = 0.02
RETRY_SECONDS = 1.0
# How long the retry sweep rests after a sweep that handed something over, and after each that found
# nothing, doubling up to the longest: sweeping once a second, an idle server queried its table for
# nothing all day. Each retry this process schedules (all of `cairn serve`'s: its dispatcher and senders
# make them) has the sweep run when it comes due, so the longest rest only bounds how late a retry
# another process wrote to the same table is taken.
SWEEP_SECONDS = 1.0
IDLE_SWEEP_SECONDS = 10.0
# How often the reader looks for new shards (DynamoDB Local rolls shards over now and then).
DESCRIBE_SECONDS = 5.0
# Reads of one batch that the dispatcher keeps failing for some address, before the reader leaves it
# (as Lambda leaves a record once its retries are spent): one address that fails every time must not
# stop the wake-ups of every other address on the server.
MAX_DISPATCH_TRIES = 50
# What GetRecords answers for an iterator that can no longer be read: it lapsed, what it pointed at was
# trimmed, or (DynamoDB Local) its shard is no longer known. The shard is read on with a new iterator.
LOST_ITERATOR = frozenset({"ExpiredIteratorException", "TrimmedDataAccessException", "ResourceNotFoundException"})


class StreamFollower:
    """Reads every shard of a table's stream from its oldest record, parents before children.

    Starting at the oldest retained record means events committed while the
    server was down are dispatched when it starts again; the dispatcher is
    safe to repeat (subscriptions keep their own cursors).

    An iterator can be refused: it expired, or (DynamoDB Local, which numbers
    the records of all its tables with one counter) it was taken on an empty
    shard, and a write to another table or a cancelled transaction took a
    number before the shard's first record, which DynamoDB Local then calls
    trimmed. An open shard may also be answered without a next iterator.
    Either would end every wake-up on the server, so the reader keeps, for
    each shard, the sequence number of the last record it handled, and reads
    on from just after it with a new iterator; a shard is left only once the
    stream says it is closed.
    """

    def __init__(
        self,
        streams: DynamoDBStreamsClient,
        stream_arn: str,
        dispatcher: Dispatcher,
        *,
        first_rest: float = POLL_SECONDS,
        longest_rest: float = IDLE_POLL_SECONDS,
    ) -> None:
        self._streams = streams
        self._arn = stream_arn
        self._dispatcher = dispatcher
        self._first_rest = first_rest
        self._longest_rest = longest_rest
        self._woken = threading.Event()
        self._iterators: dict[str, str] = {}
        self._handled_through: dict[str, str] = {}
        self._finished: set[str] = set()
        self._open: set[str] = set()
        self._failed_tries: dict[str, int] = {}
        self._parents: dict[str, str | None] = {}

    def read_soon(self) -> None:
        """Something was committed that may have added records: end the reader's rest now.

        Also what stops a reader at rest, once its stop event is set.
        """
        self._woken.set()

    def run(self, stop: threading.Event) -> None:
        described_at = float("-inf")
        rest = self._first_rest
        while not stop.is_set():
            try:
                if time.monotonic() - described_at >= DESCRIBE_SECONDS or not self._iterators:
                    self._discover()
                    described_at = time.monotonic()
                busy = self._read_all()
            except Exception:
                # Storage trouble, or anything unforeseen: a reader that stopped would end every wake-up here.
                logger.warning("reading the table's stream failed; retrying", exc_info=True)
                stop.wait(RETRY_SECONDS)
                continue
            if busy:
                rest = self._first_rest
                stop.wait(BUSY_PAUSE_SECONDS)
                continue
            woken = self._woken.wait(rest)
            # Cleared before the read that follows: a commit told after this is read by the next one.
            self._woken.clear()
            rest = self._first_rest if woken else min(rest * 2, self._longest_rest)

    def _describe(self) -> None:
        """Learn the stream's shards: each one's parent, and which are still open."""
        request: dict[str, Any] = {"StreamArn": self._arn}
        still_open: set[str] = set()
        while True:
            description = self._streams.describe_stream(**request)["StreamDescription"]
            for shard in description.get("Shards", []):
                shard_id = shard["ShardId"]
                if shard_id not in self._parents:
                    self._parents[shard_id] = shard.get("ParentShardId")
                if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {}):
                    still_open.add(shard_id)
            last = description.get("LastEvaluatedShardId")
            if not last or last == request.get("ExclusiveStartShardId"):
                # The end, or a stream that pages no further (an emulator ignoring where to start): no spin.
                break
            request["ExclusiveStartShardId"] = last
        self._open = still_open

    def _discover(self) -> None:
        """Start reading every shard not read yet whose parent, if still known, has been read to its end."""
        self._describe()
        for shard_id, parent in list(self._parents.items()):
            waiting = parent is not None and parent in self._parents and parent not in self._finished
            if shard_id in self._iterators or shard_id in self._finished or waiting:
                continue
            self._reopen(shard_id)

    def _reopen(self, shard_id: str) -> None:
        """Read `shard_id` on from just after its last handled record (from its oldest, if none was)."""
        handled = self._handled_through.get(shard_id)
        position: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
        if handled is not None:
            position = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": handled}
        try:
            iterator = self._streams.get_shard_iterator(StreamArn=self._arn, ShardId=shard_id, **position).get(
                "ShardIterator"
            )
        except ClientError as error:
            if error_code(error) == "TrimmedDataAccessException" and handled is not None:
                # What followed the last handled record has been trimmed: read on from the oldest kept.
                del self._handled_through[shard_id]
                self._reopen(shard_id)
                return
            if error_code(error) != "ResourceNotFoundException":
                raise
            iterator = None
        if iterator:
            self._iterators[shard_id] = iterator
        else:
            # Gone, or closed with nothing after the last handled record.
            self._close(shard_id)

    def _close(self, shard_id: str) -> None:
        """A shard read to its end: its children may start."""
        self._iterators.pop(shard_id, None)
        self._finished.add(shard_id)
        self._discover()

    def _read_all(self) -> bool:
        """One read of every open shard; True if any returned records."""
        busy = False
        for shard_id, iterator in list(self._iterators.items()):
            try:
                answer = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            except ClientError as error:
                if error_code(error) not in LOST_ITERATOR:
                    raise
                logger.warning("the stream refused shard %s's iterator (%s); reading on", shard_id, error_code(error))
                self._reopen(shard_id)
                continue
            records = answer.get("Records", [])
            failed = self._dispatcher.dispatch(event_notices(records)) if records else []
            if failed and self._failed_tries.get(shard_id, 0) + 1 < MAX_DISPATCH_TRIES:
                # Keep the iterator: the same records are read (and dispatched) again.
                self._failed_tries[shard_id] = self._failed_tries.get(shard_id, 0) + 1
                continue
            if failed:
                addresses = sorted({notice.address_id for notice in failed})
                logger.error("wake-ups left undelivered after %d tries: %s", MAX_DISPATCH_TRIES, addresses)
            self._failed_tries.pop(shard_id, None)
            if records:
                busy = True
                self._handled_through[shard_id] = str(records[-1].get("dynamodb", {}).get("SequenceNumber", ""))
            following = answer.get("NextShardIterator")
            if following:
                self._iterators[shard_id] = following
                continue
            self._describe()
            if shard_id in self._open:
                # No next iterator for a shard still open (DynamoDB Local): a new one reads on.
                self._reopen(shard_id)
            else:
                self._close(shard_id)
        return busy


class SweepAlarm:
    """When the retry sweep runs next: after its rest, or when a retry this process scheduled comes due.

    Times are the services' clock (epoch seconds). `ring` is called once the retry is stored, so a
    sweep that starts after it finds the retry; a ring heard while a sweep runs waits for the next.
    """

    def __init__(self, now: float, *, shortest: float = SWEEP_SECONDS, longest: float = IDLE_SWEEP_SECONDS) -> None:
        self._lock = threading.Lock()
        self._woken = threading.Event()
        self._shortest = shortest
        self._longest = longest
        self._rest = shortest
        self._rested_until = now + shortest
        self._retries: list[float] = []  # a heap of the times the retries scheduled here come due

    def ring(self, at: float) -> None:
        """A retry was scheduled for `at`."""
        with self._lock:
            heapq.heappush(self._retries, at)
        self._woken.set()

    def wake(self) -> None:
        """End the current wait without a retry (the loop is stopping)."""
        self._woken.set()

    def seconds_until_sweep(self, now: float) -> float:
        """How long until the next sweep; at most 0: sweep now, and the retries due by `now` are its."""
        with self._lock:
            next_retry = self._retries[0] if self._retries else math.inf
            seconds = min(self._rested_until, next_retry) - now
            if seconds <= 0:
                while self._retries and self._retries[0] <= now:
                    heapq.heappop(self._retries)
            return seconds

    def swept(self, *, idle: bool, now: float) -> None:
        """A sweep ended: it handed nothing over (`idle`), so the next rest is longer, or it did."""
        with self._lock:
            self._rest = min(self._rest * 2, self._longest) if idle else self._shortest
            self._rested_until = now + self._rest

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, or until a ring or `wake`."""
        self._woken.wait(seconds)
        self._woken.clear()


class WakeupLoop:
    """The stream reader and the retry sweep as two daemon threads, and the senders' pool, while the context is open."""

    def __init__(
        self,
        client: DynamoDBClient,
        streams: DynamoDBStreamsClient,
        table_name: str,
        dispatcher: Dispatcher,
        sweep: Sweep,
        alarm: SweepAlarm,
    ) -> None:
        stream_arn = client.describe_table(TableName=table_name)["Table"].get("LatestStreamArn")
        if not stream_arn:
            raise RuntimeError(f"table {table_name} has no stream")
        self._senders = ThreadPoolExecutor(max_workers=SENDER_THREADS, thread_name_prefix="wake-send")
        self._follower = StreamFollower(streams, stream_arn, dispatcher.detached(self._senders))
        self._sweep = sweep
        self._alarm = alarm
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._follower.run, args=(self._stop,), name="wake-stream", daemon=True),
            threading.Thread(target=self._sweep_forever, name="wake-sweep", daemon=True),
        ]

    def __enter__(self) -> WakeupLoop:
        for thread in self._threads:
            thread.start()
        return self

    def read_soon(self) -> None:
        """An event was appended in this process: its stream record is read now, not after the reader's rest."""
        self._follower.read_soon()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._follower.read_soon()
        self._alarm.wake()
        for thread in self._threads:
            thread.join(timeout=5)
        # Deliveries under way end by their deadline; those not started wait for the next start (their
        # events are noted, and the stream is read again from its oldest record).
        self._senders.shutdown(wait=False, cancel_futures=True)

    def _sweep_forever(self) -> None:
        while not self._stop.is_set():
            seconds = self._alarm.seconds_until_sweep(time.time())
            if seconds > 0:
                self._alarm.wait(seconds)
                continue
            idle = False  # a failed sweep is tried again after the short rest
            try:
                idle = self._sweep.run(until=self._stop.is_set) == 0
            except (ClientError, BotoCoreError):
                logger.warning("sweeping due wake-up retries failed; retrying", exc_info=True)
            self._alarm.swept(idle=idle, now=time.time())
