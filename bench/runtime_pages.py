"""How long a page of `list_run_records` takes as a run's history grows.

Runs with a short and a long history are listed from the start, from the
middle (a cursor) and near the end. If a page cost grew with history, pages
of the long run would be slower than the same page of a short one.

A long history written append by append would take minutes on DynamoDB
Local (appends to one run take turns), so it is written through the store's
own backend in units of work of many records each: records, key guards and
the run head's sequence are stored exactly as appends store them, in
transactions of up to 100 items. Only the session's commit-ordered pointers
are left out, which listing a run never reads. A real append then ends each
history and must get the next id, which checks the written run is whole.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from bench.calls import CallCounter
from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_backend import DynamoRuntimeBackend
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.model import RunRecord, RunStart
from cairn.runtime.state import UnitOfWork
from cairn.settings import Settings
from tests.contract.builders import T0, note, payload, root_start, run_start

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

PAGE = 100
SHORT = 10
# A record and its key guard per record, plus the run head: at most 100 items.
RECORDS_PER_TRANSACTION = 49
SESSION = "pages"
PAYLOAD = payload({"role": "assistant", "text": "x" * 1000})


class ItemsRead:
    """Items returned by Query calls on a client (what a page reads, not what it returns)."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._lock = threading.Lock()
        self._items = 0
        client.meta.events.register("after-call.dynamodb.Query", self._on_query)

    def _on_query(self, parsed: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self._items += parsed.get("Count", 0)

    def take(self) -> int:
        with self._lock:
            items, self._items = self._items, 0
        return items


def measure_pages(settings: Settings, table_name: str, history: int, trials: int) -> Table:
    client = make_client(settings)
    store = DynamoRuntimeStore(client, table_name)
    backend = DynamoRuntimeBackend(client, table_name)
    store.create_session(SESSION, T0)
    runs = {size: _run_with_history(store, backend, size) for size in sorted({SHORT, PAGE, history})}

    counter = CallCounter(client)
    items = ItemsRead(client)
    pages = [
        (SHORT, "first", ""),
        (SHORT, "middle", str(SHORT // 2)),
        (PAGE, "first", ""),
        (history, "first", ""),
        (history, "middle", str(history // 2)),
        (history, "last", str(history - PAGE)),
    ]
    table = Table(
        f"list_run_records page latency (limit {PAGE}, records of {len(PAYLOAD):,} payload bytes, "
        f"{trials} trials per row)",
        ["run history", "page (cursor)", "records", "DynamoDB calls per page", "items read per page", "p50 ms",
         "p99 ms", "p50 vs first page of 10"],
    )  # fmt: skip
    baseline = None
    for size, where, cursor in pages:
        run_id = runs[size].run_id
        for _ in range(3):  # warm: the first read of a run may pay for caches
            store.list_run_records(run_id, cursor=cursor, limit=PAGE)
        counter.take()
        items.take()
        latencies = []
        for _ in range(trials):
            began = time.perf_counter()
            page = store.list_run_records(run_id, cursor=cursor, limit=PAGE)
            latencies.append(time.perf_counter() - began)
        calls = counter.take(per=trials)
        p50 = percentile_ms(latencies, 50)
        baseline = baseline or p50
        table.add(
            f"{size:,} records", f"{where} ({cursor or 'none'})", len(page.events), calls,
            round(items.take() / trials), p50, percentile_ms(latencies, 99), round(p50 / baseline, 2),
        )  # fmt: skip
    table.notes += [
        f"The long run holds {history:,} records (--quick writes a shorter one). Each history is the run_started "
        "record, records written through the store's backend in units of work, and one real append at the end.",
        f"The {PAGE}-record run separates page size from history: its first page returns as many records as "
        "the long run's pages.",
        "Items read: what the Query calls returned before the page was cut at the limit.",
    ]
    return table


def _run_with_history(store: DynamoRuntimeStore, backend: DynamoRuntimeBackend, size: int) -> RunStart:
    run = run_start(f"history-{size}", session=SESSION)
    store.start_root_run(root_start(run))
    records = [replace(note(run, f"history:{number}"), payload=PAYLOAD) for number in range(2, size)]
    for start in range(0, len(records), RECORDS_PER_TRANSACTION):
        batch = records[start : start + RECORDS_PER_TRANSACTION]
        backend.transact(partial(_add_records, run_id=run.run_id, records=batch))
    last = store.append_run_record(replace(note(run, "history:last"), payload=PAYLOAD))
    if last.id != str(size):
        raise RuntimeError(f"a run written with {size} records took its next append as id {last.id}")
    return run


def _add_records(uow: UnitOfWork, run_id: str, records: list[RunRecord]) -> None:
    """Records with the next ids and the head that counts them, committed together."""
    run = uow.run(run_id)
    assert run is not None
    for record in records:
        run.next_seq += 1
        uow.add_record(replace(record, id=str(run.next_seq)))
    uow.save_run(run)
