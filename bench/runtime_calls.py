"""DynamoDB calls and transaction items per runtime store operation.

`DynamoRuntimeStore` runs in-process on its own counted client (as it runs
inside a Lambda or `cairn serve`). Commands are the contract suite's
builders (`tests/contract/builders.py`), shaped like goa-ai's fixtures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.calls import CallCounter, status_text
from bench.report import Table
from cairn.dynamodb.client import make_client
from cairn.runtime.dynamo import DynamoRuntimeStore
from cairn.settings import Settings
from tests.contract.builders import T0, child_start, note, root_start, run_start, terminal

# The builders start child runs in this session under a parent of this agent.
SESSION = "session"


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

    table.notes += [
        f"Each row runs one kind of command {repeats} times on runs of one active session (a root run that "
        "gains records and children, and root runs that start and complete); setting them up is not counted.",
        "Transaction items: actions per operation over every TransactWriteItems it sent (each a billed write): "
        "session and run heads (Put under version, or ConditionCheck), records, key guards, session pointers.",
    ]
    return table


def _inserted(result) -> str:
    return "inserted" if result.inserted else "not inserted"
