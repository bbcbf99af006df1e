"""A start that finds its session ended, in both shapes goa-ai runtimes send.

The seed document's shape (goa-ai up to 0ac5b037): the start's cancellation
field holds a canceled `run_completed`, stored with `RunStarted` in one
transaction, and the run is canceled at once. The newest shape: a
`runtime.cancellation_intent` record; the run stays running until the
runtime stores its terminal record.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cairn.runtime.errors import ContractError, RunConflictError
from cairn.runtime.model import (
    CANCELLATION_RECORD_TYPE,
    RUN_COMPLETED,
    RUN_STARTED,
    RunStartOutcome,
    RunStatus,
)
from tests.contract.builders import T0, child_start, completed_payload, record, root_start, terminal
from tests.contract.checks import raises, records_of


def canceled_completion(command, key: str = "stopped"):
    """The command with the seed document's stop record: a canceled `run_completed` at the start time."""
    run = command.run
    body = completed_payload(RunStatus.CANCELED, run.labels, reason="session_ended")
    return replace(command, cancellation=record(run, key, RUN_COMPLETED, body))


def moved(command, delta: timedelta):
    run = replace(command.run, started_at=command.run.started_at + delta)
    changes = {
        "run": run,
        "started": replace(command.started, timestamp=run.started_at),
        "cancellation": replace(command.cancellation, timestamp=run.started_at),
    }
    if getattr(command, "parent_linked", None) is not None:
        changes["parent_linked"] = replace(command.parent_linked, timestamp=run.started_at)
    return replace(command, **changes)


def ended_start(store, kind: str, shape):
    """Start of `kind` ("root" or "child") in an ended session; returns (start method, command)."""
    store.create_session("session", T0)
    if kind == "root":
        command, start = shape(root_start()), store.start_root_run
    else:
        store.start_root_run(root_start())
        command, start = shape(child_start()), store.start_child_run
    store.end_session("session", T0)
    return start, command


@pytest.mark.parametrize("kind", ["root", "child"])
def test_ended_session_start_with_a_canceled_completion_closes_the_run(store, kind):
    """The seed document's shape: RunStarted and a canceled RunCompleted, no intent record."""
    start, command = ended_start(store, kind, canceled_completion)
    run_id = command.run.run_id
    result = start(command)
    assert result.outcome == RunStartOutcome.STOP and result.run_status == RunStatus.CANCELED
    assert result.started.inserted and result.cancellation.inserted
    meta = store.load_run(run_id)
    assert meta.status == RunStatus.CANCELED and meta.cancellation_reason == "session_ended"
    assert meta.start_outcome == RunStartOutcome.STOP
    stored = records_of(store, run_id)
    assert [r.type for r in stored] == [RUN_STARTED, RUN_COMPLETED]
    assert CANCELLATION_RECORD_TYPE not in {r.type for r in stored}

    retry = start(command)
    assert (retry.started.id, retry.cancellation.id) == (result.started.id, result.cancellation.id)
    assert not retry.started.inserted and retry.run_status == RunStatus.CANCELED
    closed = start(moved(command, timedelta(hours=1)))
    assert closed.outcome == RunStartOutcome.STOP and closed.started.id == result.started.id
    assert closed.cancellation.id == result.cancellation.id and closed.run_status == RunStatus.CANCELED
    newest_shape = replace(command, cancellation=replace(root_start(command.run).cancellation))
    raises(RunConflictError, start, newest_shape)
    assert records_of(store, run_id) == stored
    if kind == "root":
        store.purge_session("session")  # nothing of the session is still running


@pytest.mark.parametrize("kind", ["root", "child"])
def test_ended_session_start_with_an_intent_keeps_the_run_running(store, kind):
    """The newest shape: the intent record; retries of the open and the closed run hold."""
    start, command = ended_start(store, kind, lambda command: command)
    result = start(command)
    assert result.outcome == RunStartOutcome.STOP and result.run_status == RunStatus.RUNNING
    assert [r.type for r in records_of(store, command.run.run_id)] == [RUN_STARTED, CANCELLATION_RECORD_TYPE]
    assert start(command).cancellation.id == result.cancellation.id
    store.record_run_terminal(terminal(command.run, RunStatus.CANCELED, reason="session_ended"))
    closed = start(moved(command, timedelta(hours=1)))
    assert closed.run_status == RunStatus.CANCELED and closed.cancellation.id == result.cancellation.id
    raises(RunConflictError, start, canceled_completion(command))


@pytest.mark.parametrize(
    ("body", "type_", "message"),
    [
        (completed_payload(RunStatus.FAILED), RUN_COMPLETED, "canceled run completion must carry reason"),
        (
            completed_payload(RunStatus.CANCELED, reason="user_requested"),
            RUN_COMPLETED,
            'canceled run completion must carry reason "session_ended"',
        ),
        (b'{"SuspensionID":"s"}', "run_suspended", 'want "runtime.cancellation_intent"'),
    ],
)
def test_ended_session_start_rejects_any_other_stop_record(store, body, type_, message):
    store.create_session("session", T0)
    store.end_session("session", T0)
    command = root_start()
    bad = replace(command, cancellation=record(command.run, "stopped", type_, body))
    raises(ContractError, store.start_root_run, bad, match=message)
    assert store.list_runs_by_session("session") == []
