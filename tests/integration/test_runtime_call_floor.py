"""Runtime writes at the call floor, and what they still guarantee (DynamoDB Local).

A writer that appends again sends only its transaction: it trusts the run
and session heads it last wrote. Another process's store (its own client
and its own memory of heads) writing in between makes that guess stale:
the failed conditions return the current heads, the next attempt uses
them, and nothing is lost, duplicated or decided on a guess.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import key
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.errors import (
    ContractError,
    EventConflictError,
    RunNotActiveError,
    SeedNotFoundError,
    SessionNotFoundError,
    SessionPurgedError,
    is_error,
)
from cairn.runtime.model import EMPTY_SEED_END_ID, SeedPublication
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

Counted = tuple[DynamoRuntimeStore, Counter[str]]


@pytest.fixture
def process(dynamodb_local, local_table: str) -> Callable[[], Counted]:
    """A new store as a new process has it: its own client (calls counted by operation) and no heads."""

    def new() -> Counted:
        client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
        calls: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
        return DynamoRuntimeStore(client, local_table), calls

    return new


def test_a_fresh_process_appends_in_two_calls_and_then_in_one_transaction(process) -> None:
    setup, _ = process()
    run = run_start("floor", session="floor-session")
    setup.create_session("floor-session", T0)
    setup.start_root_run(root_start(run))

    store, calls = process()
    assert store.append_run_record(note(run, "first")).inserted
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    calls.clear()
    assert store.append_run_record(note(run, "second")).inserted
    assert store.record_run_terminal(terminal(run)).inserted
    assert calls == Counter(TransactWriteItems=2)


def test_starts_read_once_before_their_transaction(process) -> None:
    store, calls = process()
    store.create_session("session", T0)  # the builders' child runs start in "session"
    parent = run_start("starts-parent", session="session")
    calls.clear()
    store.start_root_run(root_start(parent))
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    calls.clear()
    result = store.start_child_run(child_start("starts-child", parent.run_id, call="c1"))
    assert result.parent_record.inserted
    assert sum(calls.values()) <= 3


def test_a_stale_guess_is_corrected_by_the_failed_condition_without_a_read(process) -> None:
    first, first_calls = process()
    second, _ = process()
    run = run_start("stale", session="stale-session")
    first.create_session("stale-session", T0)
    first.start_root_run(root_start(run))
    first.append_run_record(note(run, "a"))
    second.append_run_record(note(run, "b"))  # the first store's heads are now stale
    first_calls.clear()

    result = first.append_run_record(note(run, "c"))

    assert (result.inserted, result.id) == (True, "4")  # started, a, b, then c
    assert first_calls == Counter(TransactWriteItems=2)
    page = first.list_run_records(run.run_id)
    assert [record.event_key for record in page.events][1:] == ["a", "b", "c"]


def test_an_exact_retry_and_a_changed_record_are_told_apart_after_a_full_read(process) -> None:
    store, calls = process()
    run = run_start("retry", session="retry-session")
    store.create_session("retry-session", T0)
    store.start_root_run(root_start(run))
    original = store.append_run_record(note(run, "k"))
    calls.clear()

    again = store.append_run_record(note(run, "k"))

    assert (again.inserted, again.id) == (False, original.id)
    assert calls["BatchGetItem"] == 1  # the answer comes from a consistent read, not the guess
    with pytest.raises(ContractError) as raised:
        store.append_run_record(note(run, "k", body=b'{"text":"other"}'))
    assert is_error(raised.value, EventConflictError)


def test_a_run_another_process_closed_is_reported_from_a_read_not_from_memory(process) -> None:
    first, first_calls = process()
    second, _ = process()
    run = run_start("closed", session="closed-session")
    first.create_session("closed-session", T0)
    first.start_root_run(root_start(run))
    first.append_run_record(note(run, "a"))
    second.record_run_terminal(terminal(run))
    first_calls.clear()

    with pytest.raises(ContractError) as raised:
        first.append_run_record(note(run, "late"))

    assert is_error(raised.value, RunNotActiveError)
    assert first_calls["BatchGetItem"] >= 1
    assert len(first.list_run_records(run.run_id).events) == 3  # started, a, completed


def test_processes_appending_to_one_run_at_once_lose_and_repeat_nothing(process) -> None:
    stores = [process()[0] for _ in range(4)]
    run = run_start("shared-floor", session="shared-floor-session")
    stores[0].create_session("shared-floor-session", T0)
    stores[0].start_root_run(root_start(run))

    def append_all(index: int) -> list[str]:
        return [stores[index].append_run_record(note(run, f"p{index}:{n}")).id for n in range(10)]

    with ThreadPoolExecutor(len(stores)) as pool:
        ids = [record_id for batch in pool.map(append_all, range(len(stores))) for record_id in batch]

    assert sorted(map(int, ids)) == list(range(2, 42))
    records = stores[1].list_run_records(run.run_id, limit=100).events
    assert [record.id for record in records] == [str(n) for n in range(1, 42)]
    assert len({record.event_key for record in records}) == 41


def test_a_seed_is_prepared_and_attached_in_one_read_and_one_transaction_each(process) -> None:
    store, calls = process()
    store.create_session("seed-floor-session", T0)
    run = run_start("seed-floor", session="seed-floor-session")
    seed = declaration(run)
    operations: list[Callable[[], object]] = [
        lambda: store.begin_run_seed(seed),
        lambda: store.append_run_seed(seed_append(seed, "first", EMPTY_SEED_END_ID, messages=LITERAL)),
        lambda: store.append_run_seed(seed_append(seed, "prepared", "1", prepared=PREPARED)),
        lambda: store.publish_run_seed(SeedPublication(run.run_id, seed.attempt_id, "1", "2", len(PREPARED))),
        lambda: store.start_root_run(root_start(replace(run, seed_end_id="1"))),
    ]
    counted = []
    for operation in operations:
        calls.clear()
        operation()
        counted.append(calls.copy())

    assert counted == [Counter(BatchGetItem=1, TransactWriteItems=1)] * len(operations)
    assert store.load_run_seed(run.run_id, "1").end_id == "1"
    assert store.load_run(run.run_id).seed_end_id == "1"


def test_a_seed_published_by_another_process_is_attached_from_what_a_read_shows(process) -> None:
    first, first_calls = process()
    second, _ = process()
    first.create_session("seed-other-session", T0)
    run = run_start("seed-other", session="seed-other-session")
    seed = declaration(run)
    first.begin_run_seed(seed)  # the first process keeps the seed head: nothing published yet
    second.append_run_seed(seed_append(seed, "first", EMPTY_SEED_END_ID, messages=LITERAL))
    second.append_run_seed(seed_append(seed, "prepared", "1", prepared=PREPARED))
    second.publish_run_seed(SeedPublication(run.run_id, seed.attempt_id, "1", "2", len(PREPARED)))
    first_calls.clear()

    result = first.start_root_run(root_start(replace(run, seed_end_id="1")))

    assert result.started.inserted
    # Its kept head named no published attempt, but the head the batch reads does, with the summary a
    # start checks: the attempt itself is not read.
    assert first_calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    assert first.load_run(run.run_id).seed_end_id == "1"


def test_a_process_that_has_not_seen_the_seed_appends_and_publishes_in_two_calls_each(process) -> None:
    first, _ = process()
    first.create_session("seed-fresh-session", T0)
    run = run_start("seed-fresh", session="seed-fresh-session")
    seed = declaration(run)
    first.begin_run_seed(seed)
    operations: list[Callable[[], object]] = [
        lambda: fresh.append_run_seed(seed_append(seed, "first", EMPTY_SEED_END_ID, messages=LITERAL)),
        lambda: fresh.append_run_seed(seed_append(seed, "prepared", "1", prepared=PREPARED)),
        lambda: fresh.publish_run_seed(SeedPublication(run.run_id, seed.attempt_id, "1", "2", len(PREPARED))),
    ]
    counted = []
    for operation in operations:
        # Each in a new process: it knows the seed's session only from the attempt it reads.
        fresh, calls = process()
        operation()
        counted.append(calls)

    assert counted == [Counter(BatchGetItem=1, TransactWriteItems=1)] * len(operations)
    assert first.load_run_seed(run.run_id, "1").end_id == "1"


@pytest.mark.parametrize("ending", ["purged", "head deleted"])
def test_a_seed_append_in_a_new_process_still_finds_its_session_gone(
    process, dynamodb_local, local_table: str, ending: str
) -> None:
    first, _ = process()
    session = f"seed-gone-{ending.replace(' ', '-')}"
    first.create_session(session, T0)
    run = run_start(f"seed-gone-{ending.replace(' ', '-')}", session=session)
    seed = declaration(run)
    first.begin_run_seed(seed)
    if ending == "purged":
        first.end_session(session, T0)
        first.purge_session(session)
        expected = (SessionPurgedError, SeedNotFoundError)
    else:
        # The session's head is gone while the seed is not: only a read of the session can tell.
        client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
        client.delete_item(TableName=local_table, Key=key(keys.session_pk(session), keys.META))
        expected = (SessionNotFoundError,)
    fresh, calls = process()

    with pytest.raises(ContractError) as raised:
        fresh.append_run_seed(seed_append(seed, "first", EMPTY_SEED_END_ID, messages=LITERAL))

    assert any(is_error(raised.value, kind) for kind in expected)
    assert calls["TransactWriteItems"] <= 1


def test_a_purge_racing_seed_appends_of_new_processes_leaves_nothing_of_the_seed(
    process, dynamodb_local, local_table: str
) -> None:
    setup, _ = process()
    session = "seed-race-session"
    setup.create_session(session, T0)
    run = run_start("seed-race", session=session)
    seed = declaration(run)
    setup.begin_run_seed(seed)
    appended = threading.Semaphore(0)
    ended: list[BaseException] = []

    def append_until_refused() -> int:
        end = EMPTY_SEED_END_ID
        count = 0
        while True:
            writer, _ = process()  # a new process for each append: it never read the session
            try:
                end = writer.append_run_seed(seed_append(seed, f"record-{count}", end, messages=LITERAL))
            except ContractError as error:
                ended.append(error)
                return count
            count += 1
            appended.release()

    def purge_meanwhile() -> None:
        for _ in range(3):
            appended.acquire()
        purger, _ = process()
        purger.end_session(session, T0)
        purger.purge_session(session)

    with ThreadPoolExecutor(max_workers=2) as pool:
        appends = pool.submit(append_until_refused)
        pool.submit(purge_meanwhile).result()
        count = appends.result()

    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    left = client.query(
        TableName=local_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.run_pk(run.run_id)}},
    )["Items"]
    assert count >= 3
    assert left == []  # no append committed after the purge began: none left a record behind
    assert is_error(ended[0], SessionPurgedError) or is_error(ended[0], SeedNotFoundError)


def test_a_seed_head_kept_from_before_it_carried_its_summary_is_attached_from_the_attempt(
    process, dynamodb_local, local_table: str
) -> None:
    setup, _ = process()
    setup.create_session("seed-old-head-session", T0)
    run = run_start("seed-old-head", session="seed-old-head-session")
    seed = declaration(run)
    setup.begin_run_seed(seed)
    setup.append_run_seed(seed_append(seed, "first", EMPTY_SEED_END_ID, messages=LITERAL))
    setup.append_run_seed(seed_append(seed, "prepared", "1", prepared=PREPARED))
    setup.publish_run_seed(SeedPublication(run.run_id, seed.attempt_id, "1", "2", len(PREPARED)))
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    client.update_item(
        TableName=local_table,
        Key=key(keys.run_pk(run.run_id), keys.SEED_HEAD),
        UpdateExpression="REMOVE published_seed_end_id, published_kind, published_source_run_id",
    )
    fresh, calls = process()

    result = fresh.start_root_run(root_start(replace(run, seed_end_id="1")))

    assert result.started.inserted
    assert calls == Counter(BatchGetItem=2, TransactWriteItems=1)  # the attempt, read after the batch
    assert fresh.load_run(run.run_id).seed_end_id == "1"
