"""Run record appends per second, several threads sharing one in-process store.

Each append reads the run head, its session head and the record's key guard,
then commits the record, its guard and session pointer with both heads under
their versions in one transaction; a lost race runs it again on fresh reads.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

from bench.calls import CallCounter
from bench.report import Table
from bench.timing import run_load
from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.model import RunStart
from cairn.settings import Settings
from tests.contract.builders import T0, note, root_start, run_start

CLIENTS = 8
RUNS = 50


class Appender:
    """New records for runs in turn; the threads of a scenario share it."""

    def __init__(self, store: DynamoRuntimeStore, runs: list[RunStart]) -> None:
        self._store = store
        self._runs = runs
        self._numbers = itertools.count()

    def append(self) -> str:
        number = next(self._numbers)
        result = self._store.append_run_record(note(self._runs[number % len(self._runs)], f"load:{number}"))
        return "inserted" if result.inserted else "not inserted"


def measure_appends(settings: Settings, table_name: str, seconds: float, warmup: float) -> Table:
    client = make_client(settings)
    counter = CallCounter(client)
    store = DynamoRuntimeStore(client, table_name)
    # scenario -> (clients, sessions, runs); run i belongs to session i % sessions.
    shapes = {
        "1 client, 1 run": (1, 1, 1),
        f"{CLIENTS} clients, 1 run": (CLIENTS, 1, 1),
        f"{CLIENTS} clients, {RUNS} runs in {RUNS} sessions": (CLIENTS, RUNS, RUNS),
        f"{CLIENTS} clients, {RUNS} runs in 1 session": (CLIENTS, 1, RUNS),
    }
    table = Table(
        f"Run record appends, DynamoRuntimeStore in-process on DynamoDB Local ({seconds:g} s per row after "
        f"{warmup:g} s warm-up)",
        ["scenario", "appends", "appends/s", "p50 ms", "p99 ms", "DynamoDB calls per append", "outcomes"],
    )
    for number, (name, (clients, sessions, runs)) in enumerate(shapes.items()):
        appender = Appender(store, _started_runs(store, f"load{number}", sessions, runs))
        operations = [appender.append] * clients
        run_load(operations, warmup)
        counter.take()
        result = run_load(operations, seconds)
        calls = counter.take(per=max(result.operations, 1))
        table.add(name, result.operations, result.per_second, result.p50_ms(), result.p99_ms(), calls,
                  result.outcome_text())  # fmt: skip
    table.notes += [
        "The threads share one DynamoRuntimeStore and its boto3 client; each append is a new record "
        "(a small JSON payload) to the next run in turn, so with many runs two threads rarely meet on one.",
        "Every append also moves its session's head (the commit-ordered session list), so runs of one session "
        "contend on that head as records of one run contend on the run's head.",
        "Writers in one process that meet on a head take turns on it, so contention costs re-reads (GetItem) "
        "rather than cancelled transactions; writers in other processes still race.",
    ]
    return table


def _started_runs(store: DynamoRuntimeStore, prefix: str, sessions: int, runs: int) -> list[RunStart]:
    """Sessions and running root runs, created in parallel (not counted)."""
    session_ids = [f"{prefix}-s{index}" for index in range(sessions)]
    starts = [run_start(f"{prefix}-r{index}", session=session_ids[index % sessions]) for index in range(runs)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda session_id: store.create_session(session_id, T0), session_ids))
        list(pool.map(lambda run: store.start_root_run(root_start(run)), starts))
    return starts
