"""goa-ai's runtime store contract, run against every implementation.

Cases follow the reference store's tests (store_test.go, closed_request_test.go,
continuation_admission_test.go, transcript_test.go, …) with their names.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from cairn.jsontext import MAX_DEPTH
from cairn.runtime.errors import (
    ContractError,
    EventConflictError,
    InvalidTranscriptPositionError,
    RunCancellationConflictError,
    RunConflictError,
    RunNotActiveError,
    RunNotFoundError,
    RunRecordOwnerMismatchError,
    RunSessionMismatchError,
    RunSuspensionConflictError,
    RunTerminalConflictError,
    SessionActiveError,
    SessionEndedError,
    SessionHasActiveRunsError,
    SessionNotFoundError,
    SessionPurgedError,
    is_error,
)
from cairn.runtime.model import (
    TRANSCRIPT_APPENDED,
    ChildRunStart,
    RunRepairOutcome,
    RunStartOutcome,
    RunStatus,
    RunSuspension,
    SessionStatus,
)
from tests.contract import stored
from tests.contract.builders import (
    CHECKPOINT,
    DIGEST,
    OTHER_DIGEST,
    T0,
    cancellation,
    child_start,
    intent_record,
    link_record,
    note,
    one_shot_child_start,
    one_shot_start,
    root_start,
    run_start,
    started_record,
    suspension,
    terminal,
)
from tests.contract.checks import raises, records_of

# -- sessions -------------------------------------------------------------------


def test_create_session_is_idempotent_while_active(store):
    first = store.create_session("s1", T0)
    again = store.create_session("s1", T0 + timedelta(hours=1))
    assert again == first
    assert store.load_session_status("s1") == SessionStatus.ACTIVE


def test_create_session_requires_id_and_time(store):
    raises(ContractError, store.create_session, "", T0, match="session id is required")
    raises(ContractError, store.create_session, "s", None, match="created_at is required")


def test_end_session_first_ended_at_wins(store, session):
    ended = store.end_session(session, T0 + timedelta(seconds=5))
    again = store.end_session(session, T0 + timedelta(seconds=9))
    assert again.ended_at == ended.ended_at == T0 + timedelta(seconds=5)
    raises(SessionEndedError, store.create_session, session, T0)


def test_unknown_sessions(store):
    raises(SessionNotFoundError, store.load_session, "nope")
    raises(SessionNotFoundError, store.load_session_status, "")
    raises(SessionNotFoundError, store.end_session, "nope", T0)
    raises(SessionNotFoundError, store.purge_session, "nope")
    raises(SessionNotFoundError, store.list_runs_by_session, "nope")


def test_purge_requires_ended_session_without_running_runs(store, running):
    raises(SessionActiveError, store.purge_session, "session")
    store.end_session("session", T0)
    raises(SessionHasActiveRunsError, store.purge_session, "session")
    store.record_run_suspension(suspension(running.run))
    store.purge_session("session")  # suspended runs do not block purge
    store.purge_session("session")  # idempotent


def test_purged_session_is_a_permanent_tombstone(store, running):
    store.record_run_terminal(terminal(running.run))
    store.end_session("session", T0)
    store.purge_session("session")
    for call, args in (
        (store.create_session, ("session", T0)),
        (store.load_session, ("session",)),
        (store.end_session, ("session", T0)),
        (store.list_runs_by_session, ("session",)),
        (store.list_session_run_records, ("session", "", 10)),
        (store.start_root_run, (root_start(run_start("fresh")),)),
    ):
        raises(SessionPurgedError, call, *args)
    raises(RunNotFoundError, store.load_run, "run")


def test_list_runs_by_session_filters_by_status(store, running):
    store.start_root_run(root_start(run_start("second")))
    store.record_run_terminal(terminal(run_start("second")))
    assert {meta.run_id for meta in store.list_runs_by_session("session")} == {"run", "second"}
    assert [meta.run_id for meta in store.list_runs_by_session("session", [RunStatus.COMPLETED])] == ["second"]


# -- starts ---------------------------------------------------------------------


def test_root_start_persists_one_immutable_outcome(store, running):
    store.end_session("session", T0)
    retry = store.start_root_run(running)
    assert retry.outcome == RunStartOutcome.PROCEED
    assert retry.started.inserted is False and retry.started.id == "1"
    assert [r.type for r in records_of(store, "run")] == ["run_started"]


def test_root_start_retry_keeps_original_outcome_after_completion(store, running):
    store.record_run_terminal(terminal(running.run))
    retry = store.start_root_run(running)
    assert (retry.outcome, retry.run_status, retry.started.inserted) == (
        RunStartOutcome.PROCEED,
        RunStatus.COMPLETED,
        False,
    )


def test_start_validates_both_possible_lifecycle_records(store, session):
    command = root_start()
    foreign = replace(command.cancellation, run_id="other")
    raises(RunRecordOwnerMismatchError, store.start_root_run, replace(command, cancellation=foreign))
    raises(RunNotFoundError, store.load_run, "run")


def test_start_requires_an_existing_session(store):
    raises(SessionNotFoundError, store.start_root_run, root_start())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"request_digest": bytes(32)}, "accepted request digest is required"),
        ({"run": run_start(at=T0 + timedelta(microseconds=1))}, "started_at must use millisecond precision"),
        ({"run": run_start(predecessor="run")}, "predecessor run id must differ from run id"),
        ({"run": run_start(session="")}, "session id is required"),
        ({"run": run_start(parent="p")}, "root run cannot have parent run id"),
    ],
)
def test_root_start_command_validation(store, session, change, message):
    raises(ContractError, store.start_root_run, replace(root_start(), **change), match=message)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"labels":{"site":"one"},"extra":1}', 'unknown field "extra"'),
        (b'{"labels":{"site":"one"}} {}', "multiple JSON values"),
        (b"null", "record payload must not be null"),
        (b'{"labels":{"site":"\xff"}}', "record payload contains invalid UTF-8"),
        (b'{"labels":{"site":"two"}}', "labels do not match run"),
        # Deeper than `jsontext.MAX_DEPTH`: refused before Python's decoder would recurse once per level.
        pytest.param(b"[" * 1000, f"record payload nests deeper than {MAX_DEPTH} levels", id="1000-open"),
        pytest.param(
            b'{"labels":' * MAX_DEPTH + b"{}" + b"}" * MAX_DEPTH,
            f"record payload nests deeper than {MAX_DEPTH} levels",
            id="past-the-limit",
        ),
    ],
)
def test_started_record_is_decoded_strictly(store, session, payload, message):
    command = root_start()
    error = raises(
        ContractError, store.start_root_run, replace(command, started=replace(command.started, payload=payload))
    )
    assert str(error).startswith("started record: ")
    assert message in str(error)


def test_ended_session_start_stores_cancellation_intent(store, session):
    store.end_session(session, T0)
    command = root_start()
    result = store.start_root_run(command)
    assert result.outcome == RunStartOutcome.STOP and result.run_status == RunStatus.RUNNING
    assert result.cancellation.inserted
    meta = store.load_run("run")
    assert meta.cancellation_reason == "session_ended" and meta.start_outcome == RunStartOutcome.STOP
    assert store.start_root_run(command).started.inserted is False
    other_intent = replace(command, cancellation=replace(command.cancellation, event_key="other"))
    raises(RunConflictError, store.start_root_run, other_intent)
    assert [r.type for r in records_of(store, "run")] == ["run_started", "runtime.cancellation_intent"]


def test_ended_session_start_rejects_completion_and_suspension(store, session):
    store.end_session(session, T0)
    command = root_start()
    store.start_root_run(command)
    raises(ContractError, store.record_run_terminal, terminal(command.run), match="cannot complete successfully")
    raises(ContractError, store.record_run_suspension, suspension(command.run), match="cannot suspend")
    assert store.load_run("run").status == RunStatus.RUNNING
    store.record_run_terminal(terminal(command.run, RunStatus.CANCELED, reason="session_ended"))


def test_child_start_stores_parent_link_and_child_start_together(store, running):
    result = store.start_child_run(child_start())
    assert result.outcome == RunStartOutcome.PROCEED
    assert result.parent_record.inserted and result.started.inserted
    assert [r.type for r in records_of(store, "run")] == ["run_started", "child_run_linked"]
    assert [r.type for r in records_of(store, "child")] == ["run_started"]


def test_session_child_start_requires_running_parent(store, running):
    accepted = child_start("accepted")
    first = store.start_child_run(accepted)
    store.record_run_terminal(terminal(running.run))
    raises(RunNotActiveError, store.start_child_run, child_start("late"))
    retry = store.start_child_run(accepted)
    assert (retry.parent_record.id, retry.started.id) == (first.parent_record.id, first.started.id)
    assert retry.parent_record.inserted is False and retry.started.inserted is False


def test_child_start_requires_parent_in_the_same_session(store, running):
    store.create_session("other", T0)
    other_parent = root_start(run_start("other-parent", session="other"))
    store.start_root_run(other_parent)
    raises(RunNotFoundError, store.start_child_run, child_start(parent="missing"))
    command = child_start(parent="other-parent")
    raises(RunSessionMismatchError, store.start_child_run, command)


@pytest.mark.parametrize(
    ("field", "message"),
    [("tool", "parent tool name and call id are required"), ("child", "child identity does not match run")],
)
def test_child_link_is_validated(store, running, field, message):
    command = child_start()
    body = b'{"ToolName":"","ToolCallID":"c","ChildRunID":"child","ChildAgentID":"child-agent"}'
    if field == "child":
        body = b'{"ToolName":"t","ToolCallID":"c","ChildRunID":"someone","ChildAgentID":"child-agent"}'
    bad = replace(command, parent_linked=replace(command.parent_linked, payload=body))
    error = raises(ContractError, store.start_child_run, bad, match=message)
    assert str(error).startswith("parent link record: ")


def test_child_start_after_purge_reports_purged_session(store, running):
    store.record_run_terminal(terminal(running.run))
    store.end_session("session", T0)
    store.purge_session("session")
    raises(SessionPurgedError, store.start_child_run, child_start())


def test_one_shot_child_start_stores_parent_link_and_child_start_together(store):
    store.start_one_shot_run(one_shot_start())
    command = one_shot_child_start()
    result = store.start_one_shot_child_run(command)
    assert result.parent_record.inserted and result.started.inserted
    assert result.parent_record.session_status == result.started.session_status == ""
    retry = store.start_one_shot_child_run(command)
    assert not retry.parent_record.inserted and not retry.started.inserted
    assert [r.type for r in records_of(store, "solo")] == ["run_started", "child_run_linked"]
    assert [r.type for r in records_of(store, "solo-child")] == ["run_started"]


def test_one_shot_child_start_requires_running_sessionless_parent(store, running):
    command = one_shot_child_start(parent="run")
    session_link = replace(command.parent_linked, session_id="session")
    raises(
        ContractError,
        store.start_one_shot_child_run,
        replace(command, parent_linked=session_link),
        match="parent identity does not match child run",
    )
    store.start_one_shot_run(one_shot_start())
    store.record_run_terminal(terminal(one_shot_start().run))
    raises(RunNotActiveError, store.start_one_shot_child_run, one_shot_child_start())


def test_one_shot_start_rejects_session_parent_and_predecessor(store):
    command = one_shot_start()
    for run, message in (
        (replace(command.run, session_id="s"), "one-shot run cannot have session id"),
        (replace(command.run, parent_run_id="p"), "one-shot run cannot have parent run id"),
        (replace(command.run, predecessor_run_id="p"), "one-shot run cannot have predecessor run id"),
    ):
        raises(ContractError, store.start_one_shot_run, replace(command, run=run), match=message)


# -- continuations ----------------------------------------------------------------


@pytest.fixture
def suspended_root(store, running):
    store.record_run_suspension(suspension(running.run))
    return running


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "run not found"),
        ("running", 'has status "running", want "suspended"'),
        ("completed", 'has status "completed", want "suspended"'),
        ("session", 'session id "other-session" does not match successor "session"'),
        ("agent", 'agent id "other-agent" does not match successor "agent"'),
        ("parent", 'parent run id "other-parent" does not match successor ""'),
        ("valid", ""),
    ],
)
def test_continuation_start_requires_matching_suspended_predecessor(store, session, case, message):
    store.create_session("other-session", T0)
    predecessor = {
        "running": run_start("pred"),
        "completed": run_start("pred"),
        "session": run_start("pred", session="other-session"),
        "agent": run_start("pred", agent="other-agent"),
        "valid": run_start("pred"),
    }.get(case)
    if case == "parent":
        store.start_root_run(root_start(run_start("other-parent")))
        parent_child = child_start("pred", parent="other-parent", agent="agent")
        store.start_child_run(parent_child)
        store.record_run_suspension(suspension(parent_child.run))
    elif predecessor is not None:
        store.start_root_run(root_start(predecessor))
        if case == "completed":
            store.record_run_terminal(terminal(predecessor))
        elif case != "running":
            store.record_run_suspension(suspension(predecessor))
    successor = root_start(run_start("succ", predecessor="pred"))
    if case == "valid":
        assert store.start_root_run(successor).run_status == RunStatus.RUNNING
        assert store.load_run("pred").successor_run_id == "succ"
        return
    raises(ContractError, store.start_root_run, successor, match=message)
    raises(RunNotFoundError, store.load_run, "succ")


def test_continuation_admission_selects_one_successor(store, suspended_root):
    outcomes: dict[str, object] = {}

    def start(index: int) -> None:
        command = root_start(run_start(f"succ-{index}", predecessor="run"))
        try:
            outcomes[command.run.run_id] = store.start_root_run(command)
        except Exception as error:  # noqa: BLE001 - the losers' errors are the point
            outcomes[command.run.run_id] = error

    threads = [threading.Thread(target=start, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [run_id for run_id, outcome in outcomes.items() if not isinstance(outcome, Exception)]
    assert len(winners) == 1
    assert all(is_error(o, RunConflictError) for r, o in outcomes.items() if r not in winners)
    predecessor = store.load_run("run")
    assert predecessor.successor_run_id == winners[0] and predecessor.status == RunStatus.SUSPENDED
    winner = root_start(run_start(winners[0], predecessor="run"))
    assert store.start_root_run(winner).started.inserted is False
    store.record_run_terminal(terminal(winner.run))
    assert store.start_root_run(winner).run_status == RunStatus.COMPLETED
    loser = next(run_id for run_id in outcomes if run_id not in winners)
    raises(RunConflictError, store.start_root_run, root_start(run_start(loser, predecessor="run")))
    raises(RunNotFoundError, store.load_run, loser)


def test_child_continuation_keeps_the_tool_call(store, running):
    store.start_child_run(child_start("a0", call="A", agent="worker"))
    store.record_run_suspension(suspension(run_start("a0", agent="worker", parent="run")))
    wrong_call = child_start("a1", call="B", agent="worker", predecessor="a0")
    raises(ContractError, store.start_child_run, wrong_call, match="does not match predecessor parent tool call")
    assert len(records_of(store, "run")) == 2, "nothing written"
    right = child_start("a1", call="A", agent="worker", predecessor="a0")
    assert store.start_child_run(right).outcome == RunStartOutcome.PROCEED
    assert store.load_run("a0").successor_run_id == "a1"
    raises(RunConflictError, store.start_child_run, child_start("a2", call="A", agent="worker", predecessor="a0"))


def test_child_continuation_preserves_call_across_execution_parents(store, session):
    """TestChildContinuationPreservesCallAcrossExecutionParents: a continued child keeps its tool call
    while its execution parent changes; every refused continuation writes nothing."""
    store.start_root_run(root_start(run_start("parent0")))
    a0, b0 = child_start("a0", "parent0", call="A"), child_start("b0", "parent0", call="B")
    for child in (a0, b0):
        store.start_child_run(child)
        store.record_run_suspension(suspension(child.run))
    store.record_run_suspension(suspension(run_start("parent0")))
    parent1 = run_start("parent1", predecessor="parent0")
    store.start_root_run(root_start(parent1))

    a1 = child_start("a1", "parent1", predecessor="a0", call="A")
    assert store.start_child_run(a1).outcome == RunStartOutcome.PROCEED
    assert store.load_run("a0").successor_run_id == "a1"
    parent1_records = records_of(store, "parent1")
    raises(
        ContractError,
        store.start_child_run,
        child_start("a1-b", "parent1", predecessor="a0", call="B"),
        match="does not match predecessor parent tool call",
    )
    raises(RunConflictError, store.start_child_run, child_start("a1-again", "parent1", predecessor="a0", call="A"))
    store.create_session("other", T0)
    store.start_root_run(root_start(run_start("other-parent", session="other")))
    elsewhere = run_start("a1-elsewhere", session="other", agent="child-agent", parent="other-parent", predecessor="a0")
    raises(
        ContractError,
        store.start_child_run,
        ChildRunStart(
            DIGEST, elsewhere, link_record(elsewhere, call="A"), started_record(elsewhere), intent_record(elsewhere)
        ),
        match="does not match successor",
    )
    assert records_of(store, "parent1") == parent1_records
    for refused in ("a1-b", "a1-again", "a1-elsewhere"):
        raises(RunNotFoundError, store.load_run, refused)

    store.record_run_suspension(suspension(a1.run))
    assert store.start_child_run(child_start("a2", "parent1", predecessor="a1", call="A")).outcome == (
        RunStartOutcome.PROCEED
    )
    store.record_run_suspension(suspension(parent1))
    parent2 = run_start("parent2", predecessor="parent1")
    store.start_root_run(root_start(parent2))
    b1 = child_start("b1", "parent2", predecessor="b0", call="B")
    first = store.start_child_run(b1)
    store.record_run_suspension(suspension(b1.run))
    listed = store.list_session_run_records("session", "", 1000).events
    closed = store.start_child_run(moved(b1, timedelta(hours=1)))
    assert (closed.started.id, closed.parent_record.id) == (first.started.id, first.parent_record.id)
    assert not closed.started.inserted and closed.run_status == RunStatus.SUSPENDED
    assert store.list_session_run_records("session", "", 1000).events == listed
    store.record_run_suspension(suspension(parent2))
    raises(RunNotActiveError, store.start_child_run, child_start("b1-late", "parent2", predecessor="b0", call="B"))
    raises(RunConflictError, store.start_child_run, replace(b1, request_digest=OTHER_DIGEST))


@pytest.mark.parametrize("predecessor_status", [RunStatus.RUNNING, RunStatus.SUSPENDED])
def test_child_continuation_checks_predecessor_before_parent_link(store, running, predecessor_status):
    """TestChildContinuationChecksPredecessorBeforeParentLink: a refused continuation links nothing."""
    predecessor = child_start("predecessor")
    store.start_child_run(predecessor)
    if predecessor_status == RunStatus.SUSPENDED:
        store.record_run_suspension(suspension(predecessor.run))
    parent_records = len(records_of(store, "run"))
    successor = child_start("successor", predecessor="predecessor")
    if predecessor_status == RunStatus.SUSPENDED:
        assert store.start_child_run(successor).outcome == RunStartOutcome.PROCEED
        assert len(records_of(store, "run")) == parent_records + 1
        assert store.load_run("successor").status == RunStatus.RUNNING
        return
    raises(ContractError, store.start_child_run, successor, match='has status "running", want "suspended"')
    assert len(records_of(store, "run")) == parent_records
    raises(RunNotFoundError, store.load_run, "successor")


# -- records ------------------------------------------------------------------------


def test_record_retry_requires_exact_timestamp(store):
    store.start_one_shot_run(one_shot_start())
    solo = one_shot_start().run
    first = store.append_run_record(note(solo, "n1"))
    assert first.inserted and first.session_status == ""
    again = store.append_run_record(note(solo, "n1"))
    assert (again.id, again.inserted) == (first.id, False)
    later = note(solo, "n1", at=solo.started_at + timedelta(milliseconds=11))
    error = raises(EventConflictError, store.append_run_record, later)
    assert 'run "solo" event key "n1": runlog: event conflict' in str(error)


def test_append_run_record_rejects_lifecycle_record(store, running):
    bad = note(running.run, "t", type_="run_completed")
    raises(
        ContractError, store.append_run_record, bad, match='record type "run_completed" requires a lifecycle operation'
    )
    assert store.load_run("run").status == RunStatus.RUNNING


@pytest.mark.parametrize("closing", ["completed", "failed", "canceled", "suspended"])
def test_append_run_record_rejects_new_records_after_run_stops(store, running, closing):
    run = running.run
    before = store.append_run_record(note(run, "before"))
    if closing == "suspended":
        store.record_run_suspension(suspension(run))
    elif closing == "canceled":
        store.record_run_cancellation(cancellation(run))
        store.record_run_terminal(terminal(run, RunStatus.CANCELED, reason="user_requested"))
    else:
        store.record_run_terminal(terminal(run, RunStatus(closing)))
    retry = store.append_run_record(note(run, "before"))
    assert (retry.id, retry.inserted) == (before.id, False)
    raises(RunNotActiveError, store.append_run_record, note(run, "after"))


def test_appends_to_a_running_run_of_an_ended_session_report_ended(store, running):
    store.end_session("session", T0)
    assert store.append_run_record(note(running.run, "late")).session_status == "ended"


def test_run_records_must_match_stored_run_owner(store, running):
    raises(RunRecordOwnerMismatchError, store.append_run_record, replace(note(running.run, "x"), agent_id="intruder"))
    wrong = terminal(running.run)
    raises(
        RunRecordOwnerMismatchError,
        store.record_run_terminal,
        replace(wrong, record=replace(wrong.record, session_id="elsewhere")),
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run_id": ""}, "run id is required"),
        ({"agent_id": ""}, "agent id is required"),
        ({"event_key": ""}, "event key is required"),
        ({"type": ""}, "record type is required"),
        ({"payload": b""}, "record payload is required"),
        ({"timestamp": None}, "record timestamp is required"),
        ({"timestamp": T0 + timedelta(microseconds=5)}, "record timestamp must use millisecond precision"),
    ],
)
def test_validate_run_record(store, running, change, message):
    raises(ContractError, store.append_run_record, replace(note(running.run, "k"), **change), match=message)


def test_record_ids_increase_and_cursors_are_the_last_id(store, running):
    for n in range(5):
        store.append_run_record(note(running.run, f"n{n}"))
    page = store.list_run_records("run", "", 2)
    assert [r.id for r in page.events] == ["1", "2"] and page.next_cursor == "2"
    page = store.list_run_records("run", page.next_cursor, 10)
    assert [r.id for r in page.events] == ["3", "4", "5", "6"] and page.next_cursor == ""
    assert store.list_run_records("run", "99", 10).events == []


def test_a_limit_past_any_page_answers_the_whole_list(store, running):
    # A limit comes from the request: one past what a storage page (or a 32-bit integer) holds is
    # still a limit, not a server error.
    for n in range(3):
        store.append_run_record(note(running.run, f"n{n}"))
    for limit in (2**31, 2**74):
        assert [r.id for r in store.list_run_records("run", "", limit).events] == ["1", "2", "3", "4"]
        assert len(store.list_session_run_records("session", "", limit).events) == 4


def test_record_lists_reject_unknown_state_and_invalid_cursor(store, running):
    raises(RunNotFoundError, store.list_run_records, "missing", "", 10)
    raises(SessionNotFoundError, store.list_session_run_records, "missing", "", 10)
    raises(ContractError, store.list_run_records, "run", "0", 10, match='invalid cursor "0"')
    raises(ContractError, store.list_run_records, "run", "x", 10, match="invalid cursor")
    raises(ContractError, store.list_run_records, "run", "", 0, match="limit must be greater than zero")


def test_session_listing_follows_commit_order_across_runs(store, running):
    second = run_start("second")
    store.start_root_run(root_start(second))
    store.append_run_record(note(running.run, "a"))
    store.append_run_record(note(second, "b"))
    store.append_run_record(note(running.run, "c"))
    store.start_one_shot_run(one_shot_start())  # sessionless: never listed
    page = store.list_session_run_records("session", "", 3)
    assert [(r.run_id, r.event_key) for r in page.events] == [("run", "started"), ("second", "started"), ("run", "a")]
    rest = store.list_session_run_records("session", page.next_cursor, 10)
    assert [(r.run_id, r.event_key) for r in rest.events] == [("second", "b"), ("run", "c")]
    assert rest.next_cursor == ""


def test_a_megabyte_payload_round_trips_exactly(store, running):
    body = bytes(range(256)) * 3906 + b"end!"
    body = b'"' + body.hex().encode()[:999_996] + b'"'
    assert len(body) == 999_998
    store.append_run_record(note(running.run, "big", body=body))
    assert records_of(store, "run")[-1].payload == body


# -- cancellation, suspension, terminal, repair ------------------------------------


def test_one_shot_cancellation_and_terminal_are_recorded(store):
    store.start_one_shot_run(one_shot_start())
    solo = one_shot_start().run
    assert store.record_run_cancellation(cancellation(solo)).inserted
    different = cancellation(solo, reason="session_ended")
    raises(RunCancellationConflictError, store.record_run_cancellation, different)
    command = terminal(solo)
    assert store.record_run_terminal(command).inserted
    updated_at = store.load_run("solo").updated_at
    assert store.load_run("solo").status == RunStatus.COMPLETED
    assert store.record_run_terminal(command).inserted is False
    assert store.load_run("solo").updated_at == updated_at


def test_cancellation_of_a_finished_run_is_not_active(store, running):
    store.record_run_terminal(terminal(running.run))
    raises(RunNotActiveError, store.record_run_cancellation, cancellation(running.run))


def test_suspension_checkpoint_and_terminal_record_are_atomic(store, running):
    command = suspension(running.run)
    assert store.record_run_suspension(command).inserted
    meta = store.load_run("run")
    assert meta.status == RunStatus.SUSPENDED
    assert store.load_run_suspension("run").data == CHECKPOINT
    assert store.record_run_suspension(command).inserted is False
    assert store.load_run("run").updated_at == meta.updated_at
    other = suspension(running.run, data=b'{"version":"v7"}')
    raises(RunSuspensionConflictError, store.record_run_suspension, other)


def test_suspension_checkpoint_bytes_are_kept_exactly(store, running):
    data = b'{"b": 1,  "a": "\\u00e9",\n "x": [1.50]}'
    store.record_run_suspension(suspension(running.run, data=data))
    assert store.load_run_suspension("run").data == data


def test_terminal_conflicts(store, running):
    store.record_run_terminal(terminal(running.run))
    raises(RunTerminalConflictError, store.record_run_terminal, terminal(running.run, RunStatus.FAILED, key="t2"))
    raises(RunTerminalConflictError, store.record_run_suspension, suspension(running.run))


@pytest.mark.parametrize("kind", ["terminal", "suspension"])
def test_repair_keeps_workflow_result(store, running, kind):
    record, repair = (
        (store.record_run_terminal, store.repair_run_terminal)
        if kind == "terminal"
        else (store.record_run_suspension, store.repair_run_suspension)
    )
    build = terminal if kind == "terminal" else suspension
    record(build(running.run))
    result = repair(build(running.run, at=running.run.started_at + timedelta(seconds=2)))
    assert result.outcome == RunRepairOutcome.DIFFERENT_TERMINAL
    assert result.record.id == "" and len(records_of(store, "run")) == 2


@pytest.mark.parametrize("kind", ["terminal", "suspension"])
def test_repair_retry_reports_existing_state(store, running, kind):
    repair = store.repair_run_terminal if kind == "terminal" else store.repair_run_suspension
    command = (terminal if kind == "terminal" else suspension)(running.run)
    first = repair(command)
    assert first.outcome == RunRepairOutcome.STORED and first.record.inserted
    again = repair(command)
    assert again.outcome == RunRepairOutcome.ALREADY_STORED
    assert (again.record.id, again.record.inserted, again.record.session_status) == (first.record.id, False, "active")


@pytest.mark.parametrize("kind", ["root start", "cancellation", "suspension", "terminal", "child parent link"])
def test_lifecycle_retries_require_original_record_keys(store, running, kind):
    run = running.run
    if kind == "root start":
        raises(RunConflictError, store.start_root_run, root_start(started_key="another"))
    elif kind == "cancellation":
        store.record_run_cancellation(cancellation(run))
        raises(RunCancellationConflictError, store.record_run_cancellation, cancellation(run, key="another"))
    elif kind == "suspension":
        store.record_run_suspension(suspension(run))
        raises(RunSuspensionConflictError, store.record_run_suspension, suspension(run, key="another"))
    elif kind == "terminal":
        store.record_run_terminal(terminal(run))
        raises(RunTerminalConflictError, store.record_run_terminal, terminal(run, key="another"))
    else:
        store.start_child_run(child_start())
        raises(RunConflictError, store.start_child_run, child_start(link_key="another"))


def test_lifecycle_commands_reject_contradictory_typed_records(store, running):
    run = running.run
    wrong_labels = terminal(run, body=b'{"status":"success","phase":"completed","labels":{"site":"two"}}')
    raises(ContractError, store.record_run_terminal, wrong_labels, match="labels do not match run")
    wrong_status = replace(terminal(run), status=RunStatus.FAILED)
    raises(ContractError, store.record_run_terminal, wrong_status, match="outcome does not match command")
    mismatched = suspension(run)
    mismatched = replace(mismatched, suspension=replace(mismatched.suspension, id="other"))
    raises(ContractError, store.record_run_suspension, mismatched, match="does not match checkpoint")
    reason = cancellation(run)
    raises(
        ContractError,
        store.record_run_cancellation,
        replace(reason, reason="session_ended"),
        match="reason does not match command",
    )
    store.record_run_cancellation(cancellation(run))
    engine_reason = terminal(run, RunStatus.CANCELED, reason="engine_canceled")
    raises(ContractError, store.record_run_terminal, engine_reason, match="cancellation reason does not match run")


@pytest.mark.parametrize("bad", [b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80"])
def test_terminal_validates_text_before_append(store, running, bad):
    body = (
        b'{"status":"failed","phase":"failed","failure":{"message":"'
        + bad
        + b'","kind":"k","retryable":false},"labels":{"site":"one"}}'
    )
    command = terminal(running.run, RunStatus.FAILED, body=body)
    raises(ContractError, store.record_run_terminal, command, match="record payload contains invalid UTF-8")
    assert store.load_run("run").status == RunStatus.RUNNING
    assert store.record_run_terminal(terminal(running.run, RunStatus.FAILED)).inserted


# -- closed request selection ---------------------------------------------------


KINDS = ["root", "child", "one shot", "one shot child"]
CLOSINGS = [RunStatus.SUSPENDED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED]


def start_kind(store, kind: str):
    """Start a run of `kind`; returns (start method, command, the started run)."""
    if kind in ("root", "child"):
        store.create_session("session", T0)
        store.start_root_run(root_start())
    if kind == "root":
        return store.start_root_run, root_start()
    if kind == "child":
        command = child_start()
        store.start_child_run(command)
        return store.start_child_run, command
    store.start_one_shot_run(one_shot_start())
    if kind == "one shot":
        return store.start_one_shot_run, one_shot_start()
    command = one_shot_child_start()
    store.start_one_shot_child_run(command)
    return store.start_one_shot_child_run, command


def close(store, run, status: RunStatus) -> None:
    if status == RunStatus.SUSPENDED:
        store.record_run_suspension(suspension(run))
    else:
        store.record_run_terminal(terminal(run, status))


def moved(command, delta: timedelta):
    """The same start request proposed at a later time (a new attempt of a closed request)."""
    run = replace(command.run, started_at=command.run.started_at + delta)
    changes = {"run": run, "started": replace(command.started, timestamp=run.started_at)}
    if getattr(command, "cancellation", None) is not None:
        changes["cancellation"] = replace(command.cancellation, timestamp=run.started_at)
    return replace(command, **changes)


def started_id(result) -> str:
    return (getattr(result, "started", None) or result.record).id


@pytest.mark.parametrize("status", CLOSINGS)
@pytest.mark.parametrize("kind", KINDS)
def test_closed_request_selects_original_start(store, kind, status):
    start, command = start_kind(store, kind)
    first = start(command)
    close(store, command.run, status)
    before = records_of(store, command.run.run_id)
    later = moved(command, timedelta(hours=1))
    later_run = later.run
    result = start(later)
    assert result.run_status == status
    assert started_id(result) == started_id(first)
    assert records_of(store, command.run.run_id) == before
    raises(RunConflictError, start, replace(later, request_digest=OTHER_DIGEST))
    raises(ContractError, start, replace(later, request_digest=bytes(32)), match="digest is required")
    relabeled = replace(later_run, labels={"site": "two"})
    raises(RunConflictError, start, replace(later, run=relabeled, started=started_record(relabeled)))


@pytest.mark.parametrize("kind", KINDS)
def test_request_binding_does_not_resume_running_run(store, kind):
    start, command = start_kind(store, kind)
    assert start(command) is not None
    raises(RunConflictError, start, moved(command, timedelta(seconds=1)))
    raises(RunConflictError, start, replace(command, request_digest=OTHER_DIGEST))


@pytest.mark.parametrize("status", [RunStatus.CANCELED, RunStatus.FAILED])
def test_closed_request_keeps_ended_session_decision(store, session, status):
    store.end_session(session, T0)
    command = root_start()
    first = store.start_root_run(command)
    store.record_run_terminal(terminal(command.run, status, reason="session_ended"))
    result = store.start_root_run(moved(command, timedelta(hours=1)))
    assert (result.outcome, result.run_status) == (RunStartOutcome.STOP, status)
    assert result.cancellation.id == first.cancellation.id and result.cancellation.inserted is False


# -- transcripts ---------------------------------------------------------------------


def transcript(run, key: str, size: int):
    return note(run, key, body=b'"' + b"x" * (size - 2) + b'"', type_=TRANSCRIPT_APPENDED)


def test_transcript_page_includes_exact_payload_byte_limit(store, running):
    store.append_run_record(transcript(running.run, "t", 1_048_576))
    page = store.list_run_transcript_records("run", "2")
    assert [r.id for r in page.events] == ["2"] and page.next_cursor == ""


def test_transcript_page_stops_before_copying_the_next_record(store, running):
    for key, size in (("a", 1_048_576 - 256), ("b", 256), ("c", 256)):
        store.append_run_record(transcript(running.run, key, size))
    first = store.list_run_transcript_records("run", "4")
    assert [r.event_key for r in first.events] == ["a", "b"] and first.next_cursor == "3"
    rest = store.list_run_transcript_records("run", "4", first.next_cursor)
    assert [r.event_key for r in rest.events] == ["c"] and rest.next_cursor == ""


def test_transcript_page_caps_the_requested_count(store, running):
    for n in range(513):
        store.append_run_record(transcript(running.run, f"t{n}", 10))
    first = store.list_run_transcript_records("run", "514", "", 10_000)
    assert len(first.events) == 512
    assert len(store.list_run_transcript_records("run", "514", first.next_cursor).events) == 1


def test_transcript_page_rejects_an_unsupported_single_record(store, running):
    store.append_run_record(transcript(running.run, "huge", 1_048_577))
    raises(
        ContractError,
        store.list_run_transcript_records,
        "run",
        "2",
        match="payload size 1048577 exceeds supported page size 1048576 bytes",
    )


def test_transcript_positions_are_validated(store, running):
    store.append_run_record(transcript(running.run, "t", 10))
    store.append_run_record(note(running.run, "plain"))
    raises(InvalidTranscriptPositionError, store.list_run_transcript_records, "run", "")
    raises(InvalidTranscriptPositionError, store.list_run_transcript_records, "run", "99")
    raises(InvalidTranscriptPositionError, store.list_run_transcript_records, "run", "3", "1")
    assert store.list_run_transcript_records("run", "1").events == []  # a start id means empty history
    assert [r.event_key for r in store.list_run_transcript_records("run", "3").events] == ["t"]
    raises(RunNotFoundError, store.list_run_transcript_records, "missing", "1")


@pytest.mark.parametrize("status", [RunStatus.RUNNING, *CLOSINGS])
@pytest.mark.parametrize("kind", KINDS)
def test_start_replay_returns_current_run_status(store, kind, status):
    """TestStartReplayReturnsCurrentRunStatus: an exact replay answers the original ids and the status now."""
    start, command = start_kind(store, kind)
    first = start(command)
    assert first.run_status == RunStatus.RUNNING
    if status != RunStatus.RUNNING:
        close(store, command.run, status)
    run_id = command.run.run_id
    before, meta = records_of(store, run_id), store.load_run(run_id)
    replay = start(command)
    assert replay.run_status == status
    assert started_id(replay) == started_id(first)
    assert not (getattr(replay, "started", None) or replay.record).inserted
    if hasattr(replay, "outcome"):
        assert replay.outcome == RunStartOutcome.PROCEED
    if hasattr(replay, "parent_record"):
        assert replay.parent_record.id == first.parent_record.id and not replay.parent_record.inserted
    assert records_of(store, run_id) == before and store.load_run(run_id) == meta
    if status == RunStatus.SUSPENDED:
        assert store.load_run_suspension(run_id).data == CHECKPOINT


@pytest.mark.parametrize("attempt", range(3))
def test_closed_request_contends_with_closure(store, running, attempt):
    """TestClosedRequestContendsWithClosure: a later attempt of the request races the run's terminal write.

    The terminal always lands; the start sees either the running run (its time
    differs: a conflict) or the closed one (the original start, completed).
    """
    later = moved(running, timedelta(hours=1))
    release = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def restart() -> None:
        release.wait()
        try:
            outcome["start"] = store.start_root_run(later)
        except Exception as error:  # which answer it got is asserted below
            outcome["start"] = error

    def close_run() -> None:
        release.wait()
        outcome["terminal"] = store.record_run_terminal(terminal(running.run))

    threads = [threading.Thread(target=restart), threading.Thread(target=close_run)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcome["terminal"].inserted
    started = outcome["start"]
    if isinstance(started, Exception):
        assert is_error(started, RunConflictError), started
    else:
        assert started.run_status == RunStatus.COMPLETED and not started.started.inserted
    assert store.load_run("run").started_at == running.run.started_at
    assert len(records_of(store, "run")) == 2


def corrupt(store, command, corruption: str) -> None:
    """One of goa-ai's corruptions of the proof a closed request's selection reads."""
    run_id = command.run.run_id
    start_key = command.started.event_key
    closing_key = "suspended" if corruption.startswith("checkpoint") else "terminal"
    if corruption == "binding":
        stored.edit_run(store, run_id, request_digest=b"")
    elif corruption == "start missing":
        stored.drop_key(store, run_id, start_key)
    elif corruption == "start key":
        stored.edit_run(store, run_id, start_key="another-start")
    elif corruption == "start time":
        original = stored.record(store, run_id, start_key)
        stored.replace_record(store, original, timestamp=original.timestamp + timedelta(milliseconds=1))
    elif corruption == "start payload":
        stored.replace_record(store, stored.record(store, run_id, start_key), payload=b'{"labels":{"site":"two"}}')
    elif corruption == "start id":
        stored.misdirect_key(store, run_id, start_key)
    elif corruption == "closing missing":
        stored.drop_key(store, run_id, closing_key)
    elif corruption == "closing payload":
        stored.replace_record(store, stored.record(store, run_id, closing_key), payload=b'{"status":"bogus"}')
    elif corruption == "closing identity":
        stored.replace_record(store, stored.record(store, run_id, closing_key), type="run_started")
    elif corruption == "checkpoint missing":
        stored.set_checkpoint(store, run_id, None)
    elif corruption == "checkpoint identity":
        stored.set_checkpoint(store, run_id, RunSuspension(id="another-checkpoint", data=CHECKPOINT))
    elif corruption == "parent link missing":
        stored.drop_key(store, command.parent_linked.run_id, command.parent_linked.event_key)
    else:  # parent identity
        link = stored.record(store, command.parent_linked.run_id, command.parent_linked.event_key)
        body = link.payload.replace(run_id.encode(), b"another-child")
        stored.replace_record(store, link, payload=body)


CORRUPTIONS = [
    "binding",
    "start missing",
    "start key",
    "start time",
    "start payload",
    "start id",
    "closing missing",
    "closing payload",
    "closing identity",
    "checkpoint missing",
    "checkpoint identity",
    "parent link missing",
    "parent identity",
]


@pytest.mark.parametrize("corruption", CORRUPTIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_closed_request_rejects_missing_or_corrupt_proof(store, kind, corruption):
    """TestClosedRequestRejectsMissingOrCorruptProof: damaged proof is an error, never permission to restart."""
    if not stored.reachable(store):
        pytest.skip("the HTTP client cannot reach stored items")
    if corruption.startswith("parent") and kind not in ("child", "one shot child"):
        pytest.skip("only children have a parent link")
    start, command = start_kind(store, kind)
    close(store, command.run, RunStatus.SUSPENDED if corruption.startswith("checkpoint") else RunStatus.COMPLETED)
    corrupt(store, command, corruption)
    run_id = command.run.run_id
    before, meta = records_of(store, run_id), store.load_run(run_id)
    raises(ContractError, start, moved(command, timedelta(hours=1)))
    assert records_of(store, run_id) == before and store.load_run(run_id) == meta
