"""`cairn serve`'s stream reader: a batch whose dispatch fails is read again, but not forever; a lost
iterator, or an open shard answered without a next one (as DynamoDB Local does), ends no wake-up; an
idle reader rests longer and longer, and a commit it is told of ends its rest."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cairn.local.wakeups import MAX_DISPATCH_TRIES, StreamFollower
from cairn.wakeups.models import EventNotice
from tests.support.serve import wait_until


def record(address: str, sequence: int) -> dict[str, Any]:
    image = {"pk": {"S": f"A#{address}"}, "sk": {"S": f"E#{sequence:012d}"}, "type": {"S": "job.done"}}
    return {"eventName": "INSERT", "dynamodb": {"Keys": image, "NewImage": image, "SequenceNumber": str(sequence)}}


class OneShardStream:
    """A stream of one open shard: two batches, each of one record, then nothing."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.batches = {"at-1": ([record("addr_stuck", 1)], "at-2"), "at-2": ([record("addr_fine", 1)], "at-3")}

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "at-1"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        self.reads.append(ShardIterator)
        records, following = self.batches.get(ShardIterator, ([], ShardIterator))
        return {"Records": records, "NextShardIterator": following}


class FailingFor:
    """A dispatcher that cannot handle one address `times` times (or always)."""

    def __init__(self, address_id: str, times: int | None = None) -> None:
        self.address_id = address_id
        self.times = times
        self.handled: list[str] = []

    def dispatch(self, notices: list[EventNotice]) -> list[EventNotice]:
        failing = [notice for notice in notices if notice.address_id == self.address_id]
        if failing and (self.times is None or self.times > 0):
            self.times = None if self.times is None else self.times - 1
            return failing
        self.handled.extend(notice.address_id for notice in notices)
        return []


def read(follower: StreamFollower, times: int) -> None:
    follower._discover()
    for _ in range(times):
        follower._read_all()


def test_a_batch_that_fails_for_a_while_is_read_again_until_it_is_handled():
    stream, dispatcher = OneShardStream(), FailingFor("addr_stuck", times=3)
    read(StreamFollower(stream, "arn", dispatcher), 6)  # type: ignore[arg-type]
    assert stream.reads[:5] == ["at-1"] * 4 + ["at-2"]
    assert dispatcher.handled == ["addr_stuck", "addr_fine"]


def test_an_address_that_always_fails_does_not_stop_the_others_wake_ups():
    stream, dispatcher = OneShardStream(), FailingFor("addr_stuck")
    read(StreamFollower(stream, "arn", dispatcher), MAX_DISPATCH_TRIES + 2)  # type: ignore[arg-type]
    assert stream.reads.count("at-1") == MAX_DISPATCH_TRIES
    assert dispatcher.handled == ["addr_fine"], "the batch behind it is dispatched"


@dataclass
class Shard:
    records: list[dict[str, Any]]
    parent: str | None = None
    closed: bool = False


@dataclass
class Streams:
    """The Streams API over shards held here: an iterator is a shard and a position in it.

    `lose` names iterators GetRecords refuses (once each) with an error code; `without_next` names
    iterators it answers without a next one although the shard is open, as DynamoDB Local may.
    """

    shards: dict[str, Shard]
    lose: dict[str, str] = field(default_factory=dict)
    without_next: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        described = []
        for shard_id, shard in self.shards.items():
            if shard_id in self.gone:
                continue
            span = {"StartingSequenceNumber": "1", **({"EndingSequenceNumber": "9"} if shard.closed else {})}
            described.append({"ShardId": shard_id, "SequenceNumberRange": span, "ParentShardId": shard.parent})
        return {"StreamDescription": {"Shards": described}}

    def get_shard_iterator(self, ShardId: str, ShardIteratorType: str, SequenceNumber: str = "", **_: Any) -> Any:  # noqa: N803
        if ShardId in self.gone:
            raise refusal("ResourceNotFoundException")
        records = self.shards[ShardId].records
        position = 0
        if ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            position = next(
                i + 1 for i, found in enumerate(records) if found["dynamodb"]["SequenceNumber"] == SequenceNumber
            )
        return {"ShardIterator": f"{ShardId}@{position}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        if ShardIterator in self.lose:
            raise refusal(self.lose.pop(ShardIterator))
        shard_id, position = ShardIterator.split("@")
        shard = self.shards[shard_id]
        records = shard.records[int(position) : int(position) + 2]
        following = f"{shard_id}@{int(position) + len(records)}"
        if ShardIterator in self.without_next or (shard.closed and int(position) + len(records) == len(shard.records)):
            return {"Records": records}
        return {"Records": records, "NextShardIterator": following}


def refusal(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "Invalid ShardId in ShardIterator"}}, "GetRecords")


class Recording:
    def __init__(self) -> None:
        self.handled: list[tuple[str, int]] = []

    def dispatch(self, notices: list[EventNotice]) -> list[EventNotice]:
        self.handled.extend((notice.address_id, notice.sequence) for notice in notices)
        return []


def events(address: str, first: int, last: int) -> list[dict[str, Any]]:
    return [record(address, sequence) for sequence in range(first, last + 1)]


def follow(streams: Streams, reads: int = 10) -> list[tuple[str, int]]:
    dispatcher = Recording()
    read(StreamFollower(streams, "arn", dispatcher), reads)  # type: ignore[arg-type]
    return dispatcher.handled


@pytest.mark.parametrize(
    "code", ["ResourceNotFoundException", "ExpiredIteratorException", "TrimmedDataAccessException"]
)
def test_a_refused_iterator_is_replaced_and_the_shard_read_on_after_its_last_handled_record(code: str):
    streams = Streams({"shard-1": Shard(events("a", 1, 5))}, lose={"shard-1@2": code})
    assert follow(streams) == [("a", sequence) for sequence in range(1, 6)], "every event once, in order"


def test_an_open_shard_answered_without_a_next_iterator_is_still_read():
    streams = Streams({"shard-1": Shard(events("a", 1, 3))}, without_next={"shard-1@2"})
    follower = StreamFollower(streams, "arn", dispatcher := Recording())  # type: ignore[arg-type]
    read(follower, 3)
    streams.shards["shard-1"].records += events("a", 4, 5)  # committed later, to the same open shard
    read(follower, 3)
    assert dispatcher.handled == [("a", sequence) for sequence in range(1, 6)]


def test_a_closed_shard_read_to_its_end_hands_over_to_its_child():
    streams = Streams(
        {"shard-1": Shard(events("a", 1, 3), closed=True), "shard-2": Shard(events("a", 4, 5), "shard-1")}
    )
    assert follow(streams) == [("a", sequence) for sequence in range(1, 6)], "the parent first, then the child"


def test_a_shard_that_vanished_under_its_iterator_hands_over_to_its_child():
    streams = Streams(
        {"shard-1": Shard(events("a", 1, 4)), "shard-2": Shard(events("a", 5, 6), "shard-1")},
        lose={"shard-1@2": "ResourceNotFoundException"},
    )
    follower = StreamFollower(streams, "arn", dispatcher := Recording())  # type: ignore[arg-type]
    read(follower, 1)
    streams.gone.add("shard-1")
    read(follower, 5)
    assert dispatcher.handled == [("a", 1), ("a", 2), ("a", 5), ("a", 6)]


class Unpaged(Streams):
    """A stream that names a last shard but ignores where the next page should start (as LocalStack once did)."""

    def __init__(self, shards: dict[str, Shard]) -> None:
        super().__init__(shards)
        self.pages = 0

    def describe_stream(self, **request: Any) -> dict[str, Any]:
        self.pages += 1
        assert self.pages < 10, "the reader asks for the same page again and again"
        described = super().describe_stream(**request)
        described["StreamDescription"]["LastEvaluatedShardId"] = "shard-1"
        return described


def test_a_stream_that_pages_no_further_is_described_once():
    streams = Unpaged({"shard-1": Shard(events("a", 1, 2))})
    assert follow(streams, reads=1) == [("a", 1), ("a", 2)]
    assert streams.pages == 2, "the first page, and the one that did not move on"


@dataclass
class CountedStreams(Streams):
    reads: int = 0

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        self.reads += 1
        return super().get_records(ShardIterator, Limit)


@contextmanager
def following(follower: StreamFollower) -> Iterator[None]:
    """The reader on a thread of its own, as `cairn serve` runs it; stopped as the server stops it."""
    stop = threading.Event()
    thread = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        follower.read_soon()
        thread.join(30)
    assert not thread.is_alive(), "a reader at rest stops when the server does"


def test_an_idle_reader_rests_longer_after_each_empty_read_up_to_a_second():
    streams = CountedStreams({"shard-1": Shard([])})
    with following(StreamFollower(streams, "arn", Recording())):  # type: ignore[arg-type]
        time.sleep(3)
    # Rests of 0.1, 0.2, 0.4 and 0.8 s, then 1 s: 6 reads in 3 s, where one every 0.1 s made 30.
    assert 1 <= streams.reads <= 8


def test_a_commit_the_reader_is_told_of_is_read_at_once_however_long_its_rest():
    streams = CountedStreams({"shard-1": Shard([])})
    follower = StreamFollower(streams, "arn", dispatcher := Recording(), first_rest=3600, longest_rest=3600)  # type: ignore[arg-type]
    with following(follower):
        assert wait_until(lambda: streams.reads == 1, timeout=30), "the first read, then an hour's rest"
        streams.shards["shard-1"].records += events("a", 1, 2)
        follower.read_soon()
        assert wait_until(lambda: dispatcher.handled == [("a", 1), ("a", 2)], timeout=30)
    assert streams.reads >= 2
