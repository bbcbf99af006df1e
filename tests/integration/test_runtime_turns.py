"""Runtime writers in one process take turns on a contended head instead of racing (DynamoDB Local)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.settings import Settings
from tests.contract.builders import T0, child_start, note, root_start, run_start, terminal

WRITERS = 8
APPENDS_EACH = 12


@pytest.fixture
def counted_store(dynamodb_local, local_table: str) -> tuple[DynamoRuntimeStore, Counter[str]]:
    """A store on one client whose DynamoDB calls are counted by operation."""
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    calls: Counter[str] = Counter()
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
    return DynamoRuntimeStore(client, local_table), calls


def test_writers_on_one_run_queue_so_nothing_is_lost_and_few_transactions_cancel(counted_store):
    store, calls = counted_store
    run = run_start("busy", session="shared")
    store.create_session("shared", T0)
    store.start_root_run(root_start(run))
    calls.clear()

    def append_all(writer: int) -> list[bool]:
        return [store.append_run_record(note(run, f"w{writer}:{n}")).inserted for n in range(APPENDS_EACH)]

    with ThreadPoolExecutor(WRITERS) as pool:
        results = [inserted for batch in pool.map(append_all, range(WRITERS)) for inserted in batch]

    appends = WRITERS * APPENDS_EACH
    assert results == [True] * appends
    page = store.list_run_records("busy", limit=1000)
    keys = [record.event_key for record in page.events]
    assert sorted(keys) == sorted(["started", *(f"w{w}:{n}" for w in range(WRITERS) for n in range(APPENDS_EACH))])
    assert [int(record.id) for record in page.events] == list(range(1, appends + 2))
    # Racing writers cancel about three transactions for each that lands; taking turns, almost none do.
    assert calls["TransactWriteItems"] <= 1.5 * appends, calls


def test_writers_sharing_session_parent_and_child_heads_all_finish(counted_store):
    """Units that read several heads (session, parent, child) take their turns without deadlock."""
    store, _ = counted_store
    # The builders' children join the session named "session", as their parents here do.
    store.create_session("session", T0)
    parents = [run_start(f"parent{index}") for index in range(4)]
    for parent in parents:
        store.start_root_run(root_start(parent))

    def work(index: int) -> str:
        parent = parents[index % len(parents)]
        if index % 3 == 0:
            child = child_start(f"child{index}", parent=parent.run_id, link_key=f"link{index}", call=f"call{index}")
            return store.start_child_run(child).outcome.value
        if index % 3 == 1:
            return str(store.append_run_record(note(parent, f"note{index}")).inserted)
        return str(store.append_run_record(note(parents[(index + 1) % len(parents)], f"note{index}")).inserted)

    with ThreadPoolExecutor(WRITERS) as pool:
        outcomes = list(pool.map(work, range(48), timeout=120))
    assert len(outcomes) == 48
    children = [meta.run_id for meta in store.list_runs_by_session("session") if meta.run_id.startswith("child")]
    assert len(children) == 16
    for parent in parents:
        store.record_run_terminal(terminal(parent))
