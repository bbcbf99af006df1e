"""Synchronous starts, run against every implementation.

Cases port goa-ai's `storage/inmem/synchronous_start_test.go`; each names its original.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from cairn.runtime.errors import ContractError, RunConflictError, is_error
from cairn.runtime.model import RunStatus, SynchronousRunStart
from tests.contract import stored
from tests.contract.builders import one_shot_start, started_record, suspension, terminal
from tests.contract.checks import raises, records_of

STATUSES = [RunStatus.RUNNING, RunStatus.SUSPENDED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED]


def synchronous_start() -> SynchronousRunStart:
    engine = one_shot_start()
    return SynchronousRunStart(run=engine.run, started=engine.started)


def close(store, run, status: RunStatus) -> None:
    if status == RunStatus.SUSPENDED:
        store.record_run_suspension(suspension(run))
    elif status != RunStatus.RUNNING:
        store.record_run_terminal(terminal(run, status))


def changed(command: SynchronousRunStart, change: str) -> SynchronousRunStart:
    run = command.run
    run = {
        "time": replace(run, started_at=run.started_at + timedelta(milliseconds=1)),
        "labels": replace(run, labels={"different": "metadata"}),
        "agent": replace(run, agent_id="other-agent"),
        "seed": replace(run, seed_end_id="99"),
    }.get(change, run)
    record = started_record(run)
    if change == "event key":
        record = replace(record, event_key="another-event-key")
    if change == "turn":
        record = replace(record, turn_id="another-turn")
    return SynchronousRunStart(run=run, started=record)


@pytest.mark.parametrize("status", STATUSES)
def test_synchronous_start_preserves_exact_command(store, status):
    """TestSynchronousStartPreservesExactCommand"""
    command = synchronous_start()
    first = store.start_synchronous_run(command)
    assert first.record.inserted and first.run_status == RunStatus.RUNNING
    close(store, command.run, status)
    before = records_of(store, command.run.run_id)
    meta = store.load_run(command.run.run_id)
    retry = store.start_synchronous_run(command)
    assert retry.run_status == status
    assert retry.record.id == first.record.id and not retry.record.inserted
    for change in ("time", "labels", "agent", "seed", "event key", "turn"):
        raises(ContractError, store.start_synchronous_run, changed(command, change))
        assert records_of(store, command.run.run_id) == before, change
    assert store.load_run(command.run.run_id) == meta


@pytest.mark.parametrize("closed", [False, True], ids=["running", "closed"])
@pytest.mark.parametrize("first_kind", ["synchronous", "engine"])
def test_synchronous_and_engine_start_identities_cannot_mix(store, first_kind, closed):
    """TestSynchronousAndEngineStartIdentitiesCannotMix"""
    synchronous, engine = synchronous_start(), one_shot_start()
    if first_kind == "synchronous":
        store.start_synchronous_run(synchronous)
    else:
        store.start_one_shot_run(engine)
    if closed:
        close(store, engine.run, RunStatus.COMPLETED)
    before = records_of(store, engine.run.run_id)
    if first_kind == "synchronous":
        raises(RunConflictError, store.start_one_shot_run, engine)
    else:
        raises(RunConflictError, store.start_synchronous_run, synchronous)
    assert records_of(store, engine.run.run_id) == before


def test_synchronous_and_engine_starts_contend_atomically(store):
    """TestSynchronousAndEngineStartsContendAtomically"""
    synchronous, engine = synchronous_start(), one_shot_start()
    release = threading.Barrier(2)
    outcomes: dict[str, BaseException | None] = {}

    def run(name: str, call) -> None:
        release.wait()
        try:
            call()
            outcomes[name] = None
        except Exception as error:  # the loser's answer is asserted below
            outcomes[name] = error

    threads = [
        threading.Thread(target=run, args=("synchronous", lambda: store.start_synchronous_run(synchronous))),
        threading.Thread(target=run, args=("engine", lambda: store.start_one_shot_run(engine))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    losers = [error for error in outcomes.values() if error is not None]
    assert len(losers) == 1 and is_error(losers[0], RunConflictError), outcomes
    assert len(records_of(store, engine.run.run_id)) == 1


@pytest.mark.parametrize("owner_kind", [0, 99, 2], ids=["missing", "unknown", "synchronous with engine digest"])
def test_start_rejects_missing_or_corrupt_execution_owner(store, owner_kind):
    """TestStartRejectsMissingOrCorruptExecutionOwner (the stores whose items a test can reach)"""
    if not stored.reachable(store):
        pytest.skip("the HTTP client cannot reach stored items")
    command = one_shot_start()
    store.start_one_shot_run(command)
    stored.edit_run(store, command.run.run_id, owner_kind=owner_kind)  # the digest stays the engine's
    before = records_of(store, command.run.run_id)
    raises(ContractError, store.start_one_shot_run, command)
    raises(ContractError, store.start_synchronous_run, SynchronousRunStart(run=command.run, started=command.started))
    assert records_of(store, command.run.run_id) == before
