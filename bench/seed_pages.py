"""How reading initial history costs as a chain of turns grows.

Each turn's seed is a reference to the previous, completed turn (goa-ai's
`next_turn`), never a copy. Reading a turn's seed is one page however long
the chain behind it: this measures that page for the newest turn of a short
and of a long chain, and the whole chain walked back turn by turn.
"""

from __future__ import annotations

import time
from dataclasses import replace

from bench.calls import CallCounter
from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.model import EMPTY_SEED_END_ID, RunStart, SeedKind
from cairn.settings import Settings
from tests.contract.builders import T0, complete, declaration, root_start, run_start, seed_append, terminal

SHORT, LONG = 10, 300


def measure_seed_pages(settings: Settings, table_name: str, trials: int) -> Table:
    client = make_client(settings)
    store = DynamoRuntimeStore(client, table_name)
    counter = CallCounter(client)
    table = Table(
        f"list_run_seed_records of the newest turn of a chain of next-turn seeds ({trials} trials per row)",
        ["chain", "seed pages to read the whole chain", "DynamoDB calls per page", "p50 ms", "p99 ms"],
    )
    for turns in (SHORT, LONG):
        newest = _chain(store, f"chain-{turns}", turns)
        for _ in range(3):  # warm
            store.list_run_seed_records(newest.run_id, newest.seed_end_id, "", 512)
        counter.take()
        latencies = []
        for _ in range(trials):
            began = time.perf_counter()
            store.list_run_seed_records(newest.run_id, newest.seed_end_id, "", 512)
            latencies.append(time.perf_counter() - began)
        calls = counter.take(per=trials)
        table.add(
            f"{turns} turns",
            _pages_to_walk(store, newest),
            calls,
            percentile_ms(latencies, 50),
            percentile_ms(latencies, 99),
        )
    table.notes.append(
        "Each turn's seed holds one prefix record naming the previous turn's terminal record, and the compiled "
        "start; the walk reads one seed page per turn back to the first."
    )
    return table


def _chain(store: DynamoRuntimeStore, session: str, turns: int) -> RunStart:
    """`turns` completed runs, each seeded with the one before; the newest run's start."""
    store.create_session(session, T0)
    run = replace(run_start(f"{session}-0", session=session), seed_end_id=EMPTY_SEED_END_ID)
    first = declaration(run)
    store.begin_run_seed(first)
    store.publish_run_seed(complete(store, first, EMPTY_SEED_END_ID))
    store.start_root_run(root_start(run))
    store.record_run_terminal(terminal(run))
    for turn in range(1, turns):
        d = replace(
            declaration(run_start(f"{session}-{turn}", session=session)),
            kind=SeedKind.NEXT_TURN,
            source_run_id=run.run_id,
        )
        seed = store.begin_run_seed(d)
        end = store.append_run_seed(seed_append(d, "source", seed.end_id, prefix=seed.source))
        store.publish_run_seed(complete(store, d, end))
        run = replace(run_start(d.run_id, session=session), seed_end_id=end)
        store.start_root_run(root_start(run))
        store.record_run_terminal(terminal(run))
    return run


def _pages_to_walk(store: DynamoRuntimeStore, newest: RunStart) -> int:
    pages, run_id, end_id = 0, newest.run_id, newest.seed_end_id
    while True:
        page = store.list_run_seed_records(run_id, end_id, "", 512)
        pages += 1
        prefixes = [record.prefix for record in page.records if record.prefix is not None]
        if not prefixes:
            return pages
        run_id = prefixes[0].run_id
        end_id = store.load_run(run_id).seed_end_id
