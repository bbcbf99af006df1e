"""`cairn serve`'s sweeps rest while there is nothing to do: the retry sweep longer and longer while idle,
yet at once when a retry this process scheduled comes due; the outcome sweep a tenth of the deadline."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest

from cairn.dynamodb.subscription_table import SubscriptionTable
from cairn.dynamodb.table import ensure_table
from cairn.local.outcomes import outcome_sweep_interval
from cairn.local.wakeups import IDLE_SWEEP_SECONDS, SWEEP_SECONDS, SweepAlarm, WakeupLoop

START = 1_800_000_000.0


def sweep_times(alarm: SweepAlarm, *, idle: bool, count: int, start: float = START) -> list[float]:
    """When the sweeps come, each swept as soon as it is due and found `idle` or not."""
    now, times = start, []
    for _ in range(count):
        now += max(alarm.seconds_until_sweep(now), 0)
        assert alarm.seconds_until_sweep(now) <= 0
        times.append(round(now - start, 3))
        alarm.swept(idle=idle, now=now)
    return times


def test_an_idle_sweep_rests_longer_each_time_and_one_that_handed_over_comes_back_in_a_second() -> None:
    alarm = SweepAlarm(START)
    assert sweep_times(alarm, idle=True, count=6) == [1, 3, 7, 15, 25, 35]
    assert IDLE_SWEEP_SECONDS == 10
    # Something handed over: the rest is short again.
    alarm.swept(idle=False, now=START + 40)
    assert alarm.seconds_until_sweep(START + 40) == SWEEP_SECONDS


def test_each_retry_scheduled_here_has_a_sweep_when_it_comes_due_and_not_before() -> None:
    alarm = SweepAlarm(START)
    sweep_times(alarm, idle=True, count=5)  # resting 10 s now, from START + 25
    rested = START + 25
    alarm.ring(rested + 2)
    alarm.ring(rested + 6)
    alarm.ring(rested + 2)  # two retries due at once: one sweep takes both
    assert alarm.seconds_until_sweep(rested) == 2
    assert alarm.seconds_until_sweep(rested + 2) <= 0
    alarm.swept(idle=False, now=rested + 2.5)
    # The later retry keeps its time, sooner than the rest after the sweep would end.
    assert alarm.seconds_until_sweep(rested + 2.5) == 1
    alarm.swept(idle=False, now=rested + 3.5)
    assert alarm.seconds_until_sweep(rested + 3.5) == 1
    assert alarm.seconds_until_sweep(rested + 4.5) <= 0
    alarm.swept(idle=True, now=rested + 4.5)
    assert alarm.seconds_until_sweep(rested + 4.5) == 1.5  # the retry at 6, before the 2 s rest ends
    assert alarm.seconds_until_sweep(rested + 6) <= 0
    alarm.swept(idle=True, now=rested + 6)
    # Every retry had its sweep: the idle rests alone are left.
    assert alarm.seconds_until_sweep(rested + 6) == 4


def test_a_retry_already_due_when_it_is_scheduled_is_swept_at_once() -> None:
    alarm = SweepAlarm(START)
    sweep_times(alarm, idle=True, count=5)
    alarm.ring(START)
    assert alarm.seconds_until_sweep(START + 26) <= 0


def test_every_retry_the_table_stores_is_told_with_its_time(moto_env: None) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    ensure_table(client, "cairn-test")
    told: list[float] = []
    table = SubscriptionTable(client, "cairn-test", scheduled=told.append)
    table.schedule("addr_a", "sub_a", START + 5)
    table.schedule("addr_b", "sub_b", START)
    assert told == [START + 5, START]
    assert [(due.address_id, due.subscription_id) for due in table.due(START + 5, 10)] == [
        ("addr_b", "sub_b"),
        ("addr_a", "sub_a"),
    ]


class CountingSweep:
    def __init__(self) -> None:
        self.runs = 0
        self.ran = threading.Event()

    def run(self, *, until: Any) -> int:
        self.runs += 1
        self.ran.set()
        return 0


class Describing:
    """The table client `WakeupLoop` asks for the stream's ARN, and a stream with no shard."""

    def describe_table(self, **_: Any) -> dict[str, Any]:
        return {"Table": {"LatestStreamArn": "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/x"}}

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": []}}


class NoDispatch:
    def detached(self, _: Any) -> NoDispatch:
        return self


def test_the_loop_sweeps_when_a_retry_is_rung_and_otherwise_rests() -> None:
    alarm = SweepAlarm(time.time(), shortest=3_600, longest=3_600)  # no sweep for an hour but those rung
    sweep = CountingSweep()
    with WakeupLoop(Describing(), Describing(), "t", NoDispatch(), sweep, alarm):  # type: ignore[arg-type]
        for rung in (1, 2):
            alarm.ring(time.time())
            assert sweep.ran.wait(10), "the rung retry was not swept"
            sweep.ran.clear()
            assert sweep.runs == rung


@pytest.mark.parametrize(
    ("deadline", "interval"),
    [(1, 2), (5, 2), (30, 3), (600, 60), (2 * 86_400, 60)],
)
def test_the_outcome_sweep_runs_a_tenth_of_the_deadline_apart_within_its_bounds(deadline: int, interval: float) -> None:
    assert outcome_sweep_interval(deadline) == interval
