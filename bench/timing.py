"""Run operations from several threads for a fixed time; percentiles of latencies."""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# One operation returns a label for its outcome: an HTTP status, "ok", ...
Operation = Callable[[], str]


@dataclass(frozen=True)
class LoadResult:
    operations: int
    seconds: float
    latencies: list[float]
    outcomes: Counter[str]

    @property
    def per_second(self) -> float:
        return self.operations / self.seconds

    def p50_ms(self) -> float:
        return percentile_ms(self.latencies, 50)

    def p99_ms(self) -> float:
        return percentile_ms(self.latencies, 99)

    def outcome_text(self) -> str:
        return ", ".join(f"{label} x{count}" for label, count in self.outcomes.most_common())


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, in milliseconds (NaN for no samples)."""
    if not seconds:
        return math.nan
    ordered = sorted(seconds)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1] * 1000


def run_load(operations: Sequence[Operation], seconds: float, warmup: float = 0.0) -> LoadResult:
    """Each operation runs back to back on its own thread until time is up.

    A warm-up phase of the same shape runs first and is thrown away, so the
    JVM behind DynamoDB Local and the connection pools are warm when counted.
    """
    if warmup > 0:
        _run_phase(operations, warmup)
    return _run_phase(operations, seconds)


def _run_phase(operations: Sequence[Operation], seconds: float) -> LoadResult:
    clock: dict[str, float] = {}

    def start_clock() -> None:
        clock["start"] = time.perf_counter()
        clock["deadline"] = clock["start"] + seconds

    # Every thread starts counting at the same moment.
    barrier = threading.Barrier(len(operations), action=start_clock)
    latencies: list[list[float]] = [[] for _ in operations]
    outcomes: list[Counter[str]] = [Counter() for _ in operations]
    finished: list[float] = [0.0] * len(operations)

    def worker(index: int) -> None:
        operation = operations[index]
        barrier.wait()
        while (began := time.perf_counter()) < clock["deadline"]:
            try:
                label = operation()
            except Exception as error:  # a failed call is a figure too, not a crash
                label = type(error).__name__
            latencies[index].append(time.perf_counter() - began)
            outcomes[index][label] += 1
        finished[index] = time.perf_counter()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(operations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    all_latencies = [value for values in latencies for value in values]
    return LoadResult(
        operations=len(all_latencies),
        seconds=max(finished) - clock["start"],
        latencies=all_latencies,
        outcomes=sum(outcomes, Counter()),
    )


def processor_seconds(pid: int) -> float:
    """Processor time (user and system) a running process has used so far (Linux's /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        # Fields after the command's name, which is in parentheses and may hold spaces.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
