"""DynamoDB calls and transaction items per runtime store operation.

`DynamoRuntimeStore` runs in-process on its own counted client (as it runs
inside a Lambda or `cairn serve`). Commands are the contract suite's
builders (`tests/contract/builders.py`), shaped like goa-ai's fixtures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from bench.calls import CallCounter, status_text
from bench.report import Table
from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.model import EMPTY_SEED_END_ID, AppendResult, SeedPublication
from cairn.settings import Settings
from tests.contract.builders import (
    LITERAL,
    PREPARED,
    T0,
    child_start,
    declaration,
    note,
    root_start,
    run_start,
    seed_append,
    terminal,
)

# The builders start child runs in this session under a parent of this agent.
SESSION = "session"
# Counts one row: a name, the commands it runs, and what each command's result is called.
Count = Callable[[str, list[Callable[[], Any]], Callable[[Any], str]], None]


def _fresh(client: Any, table_name: str) -> DynamoRuntimeStore:
    """A store with no heads of its own yet, as in a new Lambda container."""
    return DynamoRuntimeStore(client, table_name)


def _fresh_append(client: Any, table_name: str, record: Any) -> Any:
    return _fresh(client, table_name).append_run_record(record)


def measure_runtime_calls(settings: Settings, table_name: str, repeats: int) -> Table:
    client = make_client(settings)
    counter = CallCounter(client)
    store = DynamoRuntimeStore(client, table_name)
    table = Table(
        "DynamoDB calls per runtime store operation (DynamoRuntimeStore in-process, DynamoDB Local)",
        ["operation", "result", f"DynamoDB calls (mean of {repeats})", "transaction items"],
    )

    def count(name: str, commands: list[Callable[[], Any]], outcome: Callable[[Any], str]) -> None:
        counter.take()
        outcomes = Counter(outcome(command()) for command in commands)
        counts = counter.take(per=len(commands))
        table.add(name, status_text(outcomes), counts, counts.items_per_operation)

    store.create_session(SESSION, T0)
    parent = run_start("parent", session=SESSION)
    store.start_root_run(root_start(parent))
    roots = [run_start(f"root-{index}", session=SESSION) for index in range(repeats)]
    notes = [note(parent, f"note-{index}") for index in range(repeats)]
    children = [child_start(f"child-{index}", parent.run_id, call=f"call-{index}") for index in range(repeats)]

    count("append_run_record (new key)", [partial(store.append_run_record, r) for r in notes], _inserted)
    # A new store has no heads of its own yet, as in a new Lambda container.
    fresh_notes = [note(parent, f"fresh-{index}") for index in range(repeats)]
    count(
        "append_run_record (new key, fresh process)",
        [partial(_fresh_append, client, table_name, r) for r in fresh_notes],
        _inserted,
    )
    count("append_run_record (exact retry)", [partial(store.append_run_record, r) for r in notes], _inserted)
    count(
        "start_root_run",
        [partial(store.start_root_run, root_start(run)) for run in roots],
        lambda result: f"{result.outcome.value}, started {_inserted(result.started)}",
    )
    count(
        "start_child_run",
        [partial(store.start_child_run, command) for command in children],
        lambda result: f"{result.outcome.value}, link {_inserted(result.parent_record)}",
    )
    count(
        "record_run_terminal (completed)",
        [partial(store.record_run_terminal, terminal(run)) for run in roots],
        _inserted,
    )

    _count_seeds(count, store, repeats)
    _count_fresh_seeds(count, store, client, table_name, repeats)

    table.notes += [
        f"Each row runs one kind of command {repeats} times on runs of one active session (a root run that "
        "gains records and children, and root runs that start and complete); setting them up is not counted.",
        "Transaction items: actions per operation over every TransactWriteItems it sent (each a billed write): "
        "session and run heads (Put under version, or ConditionCheck), records, key guards, session pointers; "
        "for seeds also the seed head, the attempt, its declaration, seed records and their key guards.",
    ]
    return table


def _count_seeds(count: Count, store: DynamoRuntimeStore, repeats: int) -> None:
    """Initial history: a literal seed and the compiled start, published, then a start attaching it."""
    seeded = [run_start(f"seeded-{index}", session=SESSION) for index in range(repeats)]
    seeds = [declaration(run) for run in seeded]
    count("begin_run_seed", [partial(store.begin_run_seed, d) for d in seeds], lambda seed: f"ends at {seed.end_id}")
    count(
        "append_run_seed (literal)",
        [partial(store.append_run_seed, seed_append(d, "first", EMPTY_SEED_END_ID, messages=LITERAL)) for d in seeds],
        lambda position: f"position {position}",
    )
    count(
        "append_run_seed (compiled start)",
        [partial(store.append_run_seed, seed_append(d, "prepared", "1", prepared=PREPARED)) for d in seeds],
        lambda position: f"position {position}",
    )
    count(
        "publish_run_seed",
        [
            partial(store.publish_run_seed, SeedPublication(d.run_id, d.attempt_id, "1", "2", len(PREPARED)))
            for d in seeds
        ],
        lambda _: "published",
    )
    count(
        "start_root_run (attaching its seed)",
        [partial(store.start_root_run, root_start(replace(run, seed_end_id="1"))) for run in seeded],
        lambda result: f"{result.outcome.value}, started {_inserted(result.started)}",
    )


def _count_fresh_seeds(
    count: Count,
    store: DynamoRuntimeStore,
    client: Any,
    table_name: str,
    repeats: int,
) -> None:
    """The same, each command in a new store, as a Lambda container that has not seen the seed."""
    fresh_seeded = [run_start(f"fresh-seeded-{index}", session=SESSION) for index in range(repeats)]
    fresh_seeds = [declaration(run) for run in fresh_seeded]
    for seed in fresh_seeds:
        store.begin_run_seed(seed)
    count(
        "append_run_seed (literal, fresh process)",
        [
            partial(
                _fresh(client, table_name).append_run_seed, seed_append(d, "first", EMPTY_SEED_END_ID, messages=LITERAL)
            )
            for d in fresh_seeds
        ],
        lambda position: f"position {position}",
    )
    for seed in fresh_seeds:
        store.append_run_seed(seed_append(seed, "prepared", "1", prepared=PREPARED))
    count(
        "publish_run_seed (fresh process)",
        [
            partial(
                _fresh(client, table_name).publish_run_seed,
                SeedPublication(d.run_id, d.attempt_id, "1", "2", len(PREPARED)),
            )
            for d in fresh_seeds
        ],
        lambda _: "published",
    )
    count(
        "start_root_run (attaching its seed, fresh process)",
        [
            partial(_fresh(client, table_name).start_root_run, root_start(replace(run, seed_end_id="1")))
            for run in fresh_seeded
        ],
        lambda result: f"{result.outcome.value}, started {_inserted(result.started)}",
    )


def _inserted(result: AppendResult) -> str:
    return "inserted" if result.inserted else "not inserted"
