"""`cairn serve`'s stream reader: a batch whose dispatch fails is read again, but not forever."""

from __future__ import annotations

from typing import Any

from cairn.local.wakeups import MAX_DISPATCH_TRIES, StreamFollower
from cairn.wakeups.models import EventNotice


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
