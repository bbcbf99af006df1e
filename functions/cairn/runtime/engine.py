"""The contract's rules, written once against a `UnitOfWork`.

Each mutation validates its command, reads what it needs, decides, and
leaves its changes in the unit of work; the backend commits them atomically
or, if anything it read changed meanwhile, runs the operation again on fresh
state. The order of checks follows goa-ai's reference store, because it
decides which error a caller sees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar

from cairn.runtime import codec, seed_rules, validation
from cairn.runtime.errors import (
    ContractError,
    RunCancellationConflictError,
    RunConflictError,
    RunNotActiveError,
    RunNotFoundError,
    RunRecordOwnerMismatchError,
    RunSessionMismatchError,
    RunSuspensionConflictError,
    RunSuspensionNotFoundError,
    RunTerminalConflictError,
    SessionActiveError,
    SessionEndedError,
    SessionHasActiveRunsError,
    SessionNotFoundError,
    SessionPurgedError,
    event_conflict,
    wrap,
)
from cairn.runtime.model import (
    CANCELLATION_RECORD_TYPE,
    REASON_ENGINE_CANCELED,
    REASON_SESSION_ENDED,
    RUN_COMPLETED,
    RUN_SUSPENDED,
    AppendResult,
    ChildRunStart,
    ChildRunStartResult,
    OneShotChildRunStart,
    OneShotChildRunStartResult,
    OneShotRunStart,
    OneShotRunStartResult,
    RootRunStart,
    RootRunStartResult,
    RunCancellation,
    RunMeta,
    RunRecord,
    RunRepairOutcome,
    RunRepairResult,
    RunStart,
    RunStartOutcome,
    RunStatus,
    RunSuspensionCommand,
    RunTerminal,
    SynchronousRunStart,
)
from cairn.runtime.state import (
    ACTIVE,
    ENDED,
    ENGINE_OWNER,
    PURGED,
    PURGING,
    SYNCHRONOUS_OWNER,
    Pointer,
    RunState,
    SessionState,
    UnitOfWork,
)
from cairn.runtime.validation import fail

Payload = TypeVar("Payload")

MISSING_LIFECYCLE_RECORD = "stored run is missing a required lifecycle record"
MISMATCHED_LIFECYCLE_RECORD = "stored lifecycle record does not match its selected key"
TERMINAL_PHASES = {
    RunStatus.COMPLETED: ("success", "completed"),
    RunStatus.FAILED: ("failed", "failed"),
    RunStatus.CANCELED: ("canceled", "canceled"),
}


# -- records -------------------------------------------------------------------


def session_status_of(session: SessionState | None) -> str:
    return "" if session is None else session.status


def append(uow: UnitOfWork, run: RunState, session: SessionState | None, record: RunRecord) -> AppendResult:
    """Append one record to a run (and its session list), or return the exact original."""
    existing = uow.record_by_key(record.run_id, record.event_key)
    if existing is not None:
        if not existing.same_content(record):
            raise wrap(event_conflict(record.run_id, record.event_key))
        return AppendResult(id=existing.id, inserted=False, session_status=session_status_of(session))
    run.next_seq += 1
    stored = replace(record, id=str(run.next_seq))
    uow.add_record(stored)
    uow.save_run(run)
    if session is not None:
        session.list_seq += 1
        uow.add_pointer(session.id, Pointer(position=session.list_seq, run_id=run.meta.run_id, record_id=stored.id))
        uow.save_session(session)
    return AppendResult(id=stored.id, inserted=True, session_status=session_status_of(session))


def check_key_free(uow: UnitOfWork, record: RunRecord) -> None:
    """A new record's key must be unused or hold exactly this record."""
    existing = uow.record_by_key(record.run_id, record.event_key)
    if existing is not None and not existing.same_content(record):
        raise wrap(event_conflict(record.run_id, record.event_key))


def usable_session(uow: UnitOfWork, session_id: str) -> SessionState:
    session = uow.session(session_id)
    if session is None:
        raise wrap(SessionNotFoundError())
    if session.purged:
        raise wrap(SessionPurgedError())
    return session


def run_session(uow: UnitOfWork, run: RunState) -> SessionState | None:
    return usable_session(uow, run.meta.session_id) if run.meta.session_id else None


def existing_run(uow: UnitOfWork, run_id: str) -> RunState:
    run = uow.run(run_id)
    if run is None:
        raise wrap(RunNotFoundError())
    return run


def append_run_record(uow: UnitOfWork, record: RunRecord) -> AppendResult:
    validation.validate_ordinary_run_record(record)
    run = existing_run(uow, record.run_id)
    if record.agent_id != run.meta.agent_id or record.session_id != run.meta.session_id:
        raise wrap(RunRecordOwnerMismatchError())
    session = run_session(uow, run)
    existing = uow.record_by_key(record.run_id, record.event_key)
    if existing is None and run.meta.status.is_terminal:
        raise wrap(RunNotActiveError())
    return append(uow, run, session, record)


# -- starts --------------------------------------------------------------------


@dataclass(frozen=True)
class StartPlan:
    """One engine start, whatever its kind."""

    digest: bytes
    run: RunStart
    started: RunRecord
    parent_linked: RunRecord | None = None
    cancellation: RunRecord | None = None
    sessionful: bool = True
    owner_kind: int = ENGINE_OWNER


@dataclass(frozen=True)
class StartOutcome:
    outcome: RunStartOutcome
    status: RunStatus
    parent_record: AppendResult
    started: AppendResult
    cancellation: AppendResult


def start_root_run(uow: UnitOfWork, command: RootRunStart, now: datetime) -> RootRunStartResult:
    run = command.run
    validation.validate_digest(command.request_digest)
    validation.validate_run_start(run, child=False)
    validation.validate_started_record(run, command.started)
    validation.validate_cancellation_record(run, command.cancellation)
    validation.validate_distinct_keys(
        command.started, command.cancellation, "started and cancellation records require different event keys"
    )
    result = _start(uow, StartPlan(command.request_digest, run, command.started, None, command.cancellation), now)
    return RootRunStartResult(result.outcome, result.status, result.started, result.cancellation)


def start_child_run(uow: UnitOfWork, command: ChildRunStart, now: datetime) -> ChildRunStartResult:
    run = command.run
    validation.validate_digest(command.request_digest)
    validation.validate_run_start(run, child=True)
    validation.validate_parent_link(run, command.parent_linked)
    validation.validate_started_record(run, command.started)
    validation.validate_cancellation_record(run, command.cancellation)
    validation.validate_distinct_keys(
        command.started, command.cancellation, "started and cancellation records require different event keys"
    )
    plan = StartPlan(command.request_digest, run, command.started, command.parent_linked, command.cancellation)
    result = _start(uow, plan, now)
    return ChildRunStartResult(result.outcome, result.status, result.parent_record, result.started, result.cancellation)


def start_one_shot_run(uow: UnitOfWork, command: OneShotRunStart, now: datetime) -> OneShotRunStartResult:
    validation.validate_digest(command.request_digest)
    validation.validate_one_shot_start(command.run, child=False)
    validation.validate_started_record(command.run, command.started)
    result = _start(uow, StartPlan(command.request_digest, command.run, command.started, sessionful=False), now)
    return OneShotRunStartResult(result.status, result.started)


def start_one_shot_child_run(
    uow: UnitOfWork, command: OneShotChildRunStart, now: datetime
) -> OneShotChildRunStartResult:
    run = command.run
    validation.validate_digest(command.request_digest)
    validation.validate_one_shot_start(run, child=True)
    validation.validate_parent_link(run, command.parent_linked)
    validation.validate_started_record(run, command.started)
    validation.validate_distinct_keys(
        command.parent_linked, command.started, "parent link and started records require different event keys"
    )
    plan = StartPlan(command.request_digest, run, command.started, command.parent_linked, sessionful=False)
    result = _start(uow, plan, now)
    return OneShotChildRunStartResult(result.status, result.parent_record, result.started)


def start_synchronous_run(uow: UnitOfWork, command: SynchronousRunStart, now: datetime) -> OneShotRunStartResult:
    validation.validate_one_shot_start(command.run, child=False)
    validation.validate_started_record(command.run, command.started)
    plan = StartPlan(b"", command.run, command.started, sessionful=False, owner_kind=SYNCHRONOUS_OWNER)
    result = _start(uow, plan, now)
    return OneShotRunStartResult(result.status, result.started)


def _start(uow: UnitOfWork, plan: StartPlan, now: datetime) -> StartOutcome:
    run = plan.run
    session = uow.session(run.session_id) if plan.sessionful else None
    if session is not None and session.purged:
        raise wrap(SessionPurgedError())
    seed_rules.check_start_seed(uow, run)
    predecessor = _check_predecessor(uow, plan) if run.predecessor_run_id else None
    stored = uow.run(run.run_id)
    if stored is not None:
        return _restart(uow, plan, stored, session)
    parent = _admit_new_run(uow, plan, session)
    stop = session is not None and session.status != ACTIVE
    # An ended session's start given a canceled completion (goa-ai up to 0ac5b037) closes the run at once.
    closed_at_start = stop and plan.cancellation is not None and plan.cancellation.type == RUN_COMPLETED
    check_key_free(uow, plan.started)
    if predecessor is not None:
        _claim_succession(uow, predecessor, run.run_id)
    parent_record = AppendResult()
    if parent is not None and plan.parent_linked is not None:
        parent_session = session if parent.meta.session_id else None
        parent_record = append(uow, parent, parent_session, plan.parent_linked)
    state = _new_run_state(plan, now, stop=stop, closed_at_start=closed_at_start)
    if session is not None and not closed_at_start:
        session.running_runs += 1
    started = append(uow, state, session, plan.started)
    cancellation = AppendResult()
    if stop and plan.cancellation is not None:
        # The closed-request proof finds the stop record under this key, whichever shape it has.
        state.cancellation_key = plan.cancellation.event_key
        if closed_at_start:
            state.terminal_key = plan.cancellation.event_key
        cancellation = append(uow, state, session, plan.cancellation)
    uow.save_run(state)
    return StartOutcome(state.meta.start_outcome, state.meta.status, parent_record, started, cancellation)


def _admit_new_run(uow: UnitOfWork, plan: StartPlan, session: SessionState | None) -> RunState | None:
    """The checks of a start that makes a new run (not a retry): its parent, then its session."""
    parent = _check_parent(uow, plan) if plan.parent_linked is not None else None
    if plan.sessionful and session is None:
        raise wrap(SessionNotFoundError())
    if parent is not None:
        _check_parent_admits_child(plan, parent)
    return parent


def _claim_succession(uow: UnitOfWork, predecessor: RunState, run_id: str) -> None:
    """A suspended run has one successor: the first start to continue it, or its exact retry."""
    if predecessor.meta.successor_run_id and predecessor.meta.successor_run_id != run_id:
        raise wrap(RunConflictError())
    predecessor.update(successor_run_id=run_id)
    uow.save_run(predecessor)


def _new_run_state(plan: StartPlan, now: datetime, *, stop: bool, closed_at_start: bool) -> RunState:
    """The state of a run a start admits: running, or stopped at once in an ended session."""
    run = plan.run
    return RunState(
        meta=RunMeta(
            agent_id=run.agent_id,
            run_id=run.run_id,
            status=RunStatus.CANCELED if closed_at_start else RunStatus.RUNNING,
            start_outcome=RunStartOutcome.STOP if stop else RunStartOutcome.PROCEED,
            started_at=run.started_at,
            updated_at=now,
            seed_end_id=run.seed_end_id,
            session_id=run.session_id,
            parent_run_id=run.parent_run_id,
            labels=dict(run.labels or {}),
            cancellation_reason=REASON_SESSION_ENDED if stop else "",
        ),
        owner_kind=plan.owner_kind,
        request_digest=plan.digest,
        predecessor_run_id=run.predecessor_run_id,
        start_key=plan.started.event_key,
        parent_link_key=plan.parent_linked.event_key if plan.parent_linked is not None else "",
    )


def _check_predecessor(uow: UnitOfWork, plan: StartPlan) -> RunState:
    run = plan.run
    name = f'continuation predecessor "{run.predecessor_run_id}"'
    predecessor = uow.run(run.predecessor_run_id)
    if predecessor is None:
        raise wrap(RunNotFoundError(f"{name}: run not found"))
    meta = predecessor.meta
    if meta.status != RunStatus.SUSPENDED:
        raise fail(f'{name} has status "{meta.status}", want "suspended"')
    if meta.session_id != run.session_id:
        raise fail(f'{name} session id "{meta.session_id}" does not match successor "{run.session_id}"')
    if meta.agent_id != run.agent_id:
        raise fail(f'{name} agent id "{meta.agent_id}" does not match successor "{run.agent_id}"')
    if not meta.parent_run_id or not run.parent_run_id:
        if meta.parent_run_id != run.parent_run_id:
            raise fail(f'{name} parent run id "{meta.parent_run_id}" does not match successor "{run.parent_run_id}"')
        return predecessor
    # A child continuation may run under a new execution parent, but it must
    # continue the same tool call the predecessor was started for.
    original_parent = uow.run(meta.parent_run_id)
    original_link = uow.record_by_key(meta.parent_run_id, predecessor.parent_link_key) if original_parent else None
    if original_parent is None or original_link is None:
        raise fail(MISSING_LIFECYCLE_RECORD)
    old = validation.validate_parent_link(_start_of(meta, predecessor.predecessor_run_id), original_link)
    link = plan.parent_linked
    new = codec.decode_child_run_linked(link.payload) if link else None
    if (
        link is None
        or new is None
        or (new.tool_call_id, new.tool_name, new.child_agent_id)
        != (old.tool_call_id, old.tool_name, old.child_agent_id)
        or link.agent_id != original_link.agent_id
        or link.session_id != original_link.session_id
    ):
        raise fail("child continuation does not match predecessor parent tool call")
    return predecessor


def _check_parent(uow: UnitOfWork, plan: StartPlan) -> RunState:
    assert plan.parent_linked is not None
    parent = uow.run(plan.run.parent_run_id)
    if parent is None:
        raise wrap(RunNotFoundError())
    check_key_free(uow, plan.parent_linked)
    return parent


def _check_parent_admits_child(plan: StartPlan, parent: RunState) -> None:
    """The active-parent rule, and the link's owner on sessionless parents."""
    assert plan.parent_linked is not None
    if plan.sessionful:
        if parent.meta.session_id != plan.run.session_id:
            raise wrap(RunSessionMismatchError())
    elif parent.meta.session_id:
        raise wrap(RunSessionMismatchError())
    if parent.meta.status != RunStatus.RUNNING:
        raise wrap(RunNotActiveError())
    if plan.parent_linked.agent_id != parent.meta.agent_id:
        raise wrap(RunRecordOwnerMismatchError())


def _start_of(meta: RunMeta, predecessor_run_id: str = "") -> RunStart:
    return RunStart(
        agent_id=meta.agent_id,
        run_id=meta.run_id,
        started_at=meta.started_at,
        seed_end_id=meta.seed_end_id,
        session_id=meta.session_id,
        parent_run_id=meta.parent_run_id,
        predecessor_run_id=predecessor_run_id,
        labels=meta.labels,
    )


def _restart(uow: UnitOfWork, plan: StartPlan, stored: RunState, session: SessionState | None) -> StartOutcome:
    """A start of a run that exists: an exact retry, or a closed request's selection."""
    if stored.owner_kind not in (ENGINE_OWNER, SYNCHRONOUS_OWNER):
        raise fail("stored run has no valid start kind")
    if stored.owner_kind != plan.owner_kind:
        raise wrap(RunConflictError())
    if stored.owner_kind == SYNCHRONOUS_OWNER:
        return _repeat_synchronous(uow, plan, stored)
    if not stored.request_digest:
        raise fail("stored run has no accepted request digest")
    if stored.request_digest != plan.digest:
        raise wrap(RunConflictError())
    if stored.meta.status == RunStatus.RUNNING:
        return _retry_running(uow, plan, stored, session)
    return _select_closed(uow, plan, stored, session)


def _repeat_synchronous(uow: UnitOfWork, plan: StartPlan, stored: RunState) -> StartOutcome:
    """A synchronous start repeats its complete command, time included, whatever the run's status; it writes nothing."""
    if stored.request_digest:
        raise fail("stored synchronous run has an engine request digest")
    if not _same_identity(plan, stored, with_time=True) or plan.started.event_key != stored.start_key:
        raise wrap(RunConflictError())
    original = _stored_lifecycle(uow, stored.meta.run_id, stored.start_key)
    if not original.same_content(plan.started):
        raise wrap(event_conflict(original.run_id, original.event_key))
    started = AppendResult(id=original.id, inserted=False)
    return StartOutcome(stored.meta.start_outcome, stored.meta.status, AppendResult(), started, AppendResult())


def _same_identity(plan: StartPlan, stored: RunState, *, with_time: bool) -> bool:
    original = _start_of(stored.meta, stored.predecessor_run_id)
    candidate = plan.run if with_time else replace(plan.run, started_at=original.started_at)
    return replace(candidate, labels=dict(candidate.labels or {})) == replace(original, labels=dict(original.labels))


def _retry_running(uow: UnitOfWork, plan: StartPlan, stored: RunState, session: SessionState | None) -> StartOutcome:
    stop = stored.meta.start_outcome == RunStartOutcome.STOP
    if not _same_identity(plan, stored, with_time=True):
        raise wrap(RunConflictError())
    if plan.started.event_key != stored.start_key:
        raise wrap(RunConflictError())
    if plan.parent_linked is not None and plan.parent_linked.event_key != stored.parent_link_key:
        raise wrap(RunConflictError())
    if stop and (plan.cancellation is None or plan.cancellation.event_key != stored.cancellation_key):
        raise wrap(RunConflictError())
    parent_record = AppendResult()
    if plan.parent_linked is not None:
        parent = existing_run(uow, plan.run.parent_run_id)
        parent_record = append(uow, parent, session if parent.meta.session_id else None, plan.parent_linked)
    started = append(uow, stored, session, plan.started)
    cancellation = append(uow, stored, session, plan.cancellation) if stop and plan.cancellation else AppendResult()
    return StartOutcome(stored.meta.start_outcome, stored.meta.status, parent_record, started, cancellation)


def _select_closed(uow: UnitOfWork, plan: StartPlan, stored: RunState, session: SessionState | None) -> StartOutcome:
    """Prove from stored records that this request is the one that ran; write nothing."""
    if not _same_identity(plan, stored, with_time=False):
        raise wrap(RunConflictError())
    if plan.sessionful and session is None:
        raise wrap(SessionNotFoundError())
    status = session_status_of(session)
    original_start = _stored_lifecycle(uow, stored.meta.run_id, stored.start_key)
    validation.validate_started_record(_start_of(stored.meta, stored.predecessor_run_id), original_start)
    if not _same_except_time(plan.started, original_start):
        raise wrap(RunConflictError())
    parent_record = AppendResult()
    if stored.parent_link_key or plan.parent_linked is not None:
        if plan.parent_linked is None or not stored.parent_link_key:
            raise wrap(RunConflictError())
        link = _stored_lifecycle(uow, stored.meta.parent_run_id, stored.parent_link_key)
        validation.validate_parent_link(_start_of(stored.meta), link)
        if not _same_except_time(plan.parent_linked, link):
            raise wrap(RunConflictError())
        parent_record = AppendResult(id=link.id, session_status=status)
    _check_closing_proof(uow, stored)
    cancellation = AppendResult()
    if stored.meta.start_outcome == RunStartOutcome.STOP:
        if plan.cancellation is None or stored.meta.status not in (RunStatus.CANCELED, RunStatus.FAILED):
            raise fail(MISSING_LIFECYCLE_RECORD)
        intent = _stored_lifecycle(uow, stored.meta.run_id, stored.cancellation_key)
        if intent.timestamp != stored.meta.started_at or not _same_except_time(plan.cancellation, intent):
            raise wrap(RunConflictError())
        cancellation = AppendResult(id=intent.id, session_status=status)
    started = AppendResult(id=original_start.id, session_status=status)
    return StartOutcome(stored.meta.start_outcome, stored.meta.status, parent_record, started, cancellation)


def _check_closing_proof(uow: UnitOfWork, stored: RunState) -> None:
    closing = _stored_lifecycle(uow, stored.meta.run_id, stored.terminal_key)
    if stored.meta.status == RunStatus.SUSPENDED:
        checkpoint = uow.checkpoint(stored.meta.run_id)
        if checkpoint is None or stored.suspension_key != stored.terminal_key:
            raise wrap(RunSuspensionNotFoundError())
        suspended = validation.decode(codec.decode_run_suspended, closing.payload)
        if closing.type != RUN_SUSPENDED or suspended.suspension_id != checkpoint.id:
            raise fail(MISMATCHED_LIFECYCLE_RECORD)
    elif closing.type != RUN_COMPLETED:
        raise fail(MISMATCHED_LIFECYCLE_RECORD)
    else:
        validation.decode(codec.decode_run_completed, closing.payload)


def _stored_lifecycle(uow: UnitOfWork, run_id: str, event_key: str) -> RunRecord:
    record = uow.record_by_key(run_id, event_key) if event_key else None
    if record is None or not record.id:
        raise fail(MISSING_LIFECYCLE_RECORD)
    if record.run_id != run_id or record.event_key != event_key:
        raise fail(MISMATCHED_LIFECYCLE_RECORD)
    return record


def _same_except_time(candidate: RunRecord, original: RunRecord) -> bool:
    return replace(candidate, timestamp=original.timestamp, id=original.id).same_content(original)


# -- cancellation, suspension, terminal ---------------------------------------


def _command_target(uow: UnitOfWork, run_id: str, record: RunRecord, noun: str) -> tuple[RunState, SessionState | None]:
    """The run a cancellation, suspension or terminal command names, after the checks they share."""
    validation.validate_run_record(record)
    run = existing_run(uow, run_id)
    session = run_session(uow, run)
    if record.run_id != run_id:
        raise fail(f"{noun} command does not match stored run")
    return run, session


def _typed_payload(
    run: RunState, record: RunRecord, record_type: str, decoder: Callable[[bytes], Payload], prefix: str
) -> Payload:
    """A lifecycle record's strictly decoded payload, after its type and owner checks."""
    if record.type != record_type:
        raise fail(f'{prefix}record has type "{record.type}", want "{record_type}"')
    try:
        payload = validation.decode(decoder, record.payload)
    except ContractError as error:
        raise wrap(error, prefix) from None
    validation.check_owner(record, run.meta.run_id, run.meta.agent_id, run.meta.session_id, prefix)
    return payload


def record_run_cancellation(uow: UnitOfWork, command: RunCancellation, now: datetime) -> AppendResult:
    if not command.run_id or not command.reason:
        raise fail("run cancellation requires run id and reason")
    run, session = _command_target(uow, command.run_id, command.record, "cancellation")
    record = command.record
    validation.check_owner(record, run.meta.run_id, run.meta.agent_id, run.meta.session_id, "cancellation record: ")
    if record.type != CANCELLATION_RECORD_TYPE:
        raise fail(f'cancellation record has type "{record.type}", want "{CANCELLATION_RECORD_TYPE}"')
    if validation.decode(codec.decode_cancellation_reason, record.payload) != command.reason:
        raise fail("cancellation record reason does not match command")
    if run.meta.cancellation_reason and run.meta.cancellation_reason != command.reason:
        raise wrap(RunCancellationConflictError())
    if run.cancellation_key and run.cancellation_key != record.event_key:
        raise wrap(RunCancellationConflictError())
    if not run.cancellation_key and run.meta.status.is_terminal:
        raise wrap(RunNotActiveError())
    result = append(uow, run, session, record)
    if result.inserted:
        run.cancellation_key = record.event_key
        run.update(cancellation_reason=command.reason, updated_at=now)
        uow.save_run(run)
    return result


def _suspension_checks(uow: UnitOfWork, command: RunSuspensionCommand) -> tuple[RunState, SessionState | None]:
    suspension = command.suspension
    if not command.run_id or not suspension.id or not suspension.data:
        raise fail("run suspension requires run id, suspension id, and data")
    run, session = _command_target(uow, command.run_id, command.record, "suspension")
    record = command.record
    if run.meta.start_outcome == RunStartOutcome.STOP:
        raise fail("ended-session start cannot suspend instead of settling cancellation")
    prefix = "suspension record: "
    suspended = _typed_payload(run, record, RUN_SUSPENDED, codec.decode_run_suspended, prefix)
    if suspended.suspension_id != suspension.id:
        raise fail(f"{prefix}suspension record does not match checkpoint")
    return run, session


def record_run_suspension(uow: UnitOfWork, command: RunSuspensionCommand, now: datetime) -> AppendResult:
    run, session = _suspension_checks(uow, command)
    if run.meta.status.is_terminal and run.meta.status != RunStatus.SUSPENDED:
        raise wrap(RunTerminalConflictError())
    stored = uow.checkpoint(run.meta.run_id)
    if stored is not None and stored != command.suspension:
        raise wrap(RunSuspensionConflictError())
    if run.suspension_key and run.suspension_key != command.record.event_key:
        raise wrap(RunSuspensionConflictError())
    result = append(uow, run, session, command.record)
    if result.inserted:
        uow.save_checkpoint(run.meta.run_id, command.suspension)
        run.suspension_key = run.terminal_key = command.record.event_key
        _close(uow, run, session, RunStatus.SUSPENDED, now)
    return result


def _terminal_checks(uow: UnitOfWork, command: RunTerminal) -> tuple[RunState, SessionState | None]:
    if command.status not in TERMINAL_PHASES:
        raise fail("run terminal requires completed, failed, or canceled status")
    run, session = _command_target(uow, command.run_id, command.record, "terminal")
    record = command.record
    if run.meta.start_outcome == RunStartOutcome.STOP and command.status == RunStatus.COMPLETED:
        raise fail("ended-session start cannot complete successfully")
    prefix = "terminal record: "
    completed = _typed_payload(run, record, RUN_COMPLETED, codec.decode_run_completed, prefix)
    if (completed.status, completed.phase) != TERMINAL_PHASES[command.status]:
        raise fail(f"{prefix}terminal record outcome does not match command")
    if completed.labels != run.meta.labels:
        raise fail(f"{prefix}terminal record labels do not match run")
    if command.status == RunStatus.CANCELED:
        expected = run.meta.cancellation_reason or REASON_ENGINE_CANCELED
        if completed.cancellation_reason != expected:
            raise fail(f"{prefix}terminal record cancellation reason does not match run")
    return run, session


def record_run_terminal(uow: UnitOfWork, command: RunTerminal, now: datetime) -> AppendResult:
    run, session = _terminal_checks(uow, command)
    if run.meta.status.is_terminal and run.meta.status != command.status:
        raise wrap(RunTerminalConflictError())
    if run.terminal_key and run.terminal_key != command.record.event_key:
        raise wrap(RunTerminalConflictError())
    result = append(uow, run, session, command.record)
    if result.inserted:
        run.terminal_key = command.record.event_key
        _close(uow, run, session, command.status, now)
    return result


def _close(uow: UnitOfWork, run: RunState, session: SessionState | None, status: RunStatus, now: datetime) -> None:
    if session is not None and run.meta.status == RunStatus.RUNNING:
        session.running_runs -= 1
        uow.save_session(session)
    run.update(status=status, updated_at=now)
    uow.save_run(run)


def repair_run_suspension(uow: UnitOfWork, command: RunSuspensionCommand, now: datetime) -> RunRepairResult:
    run, session = _suspension_checks(uow, command)
    if not run.meta.status.is_terminal:
        return RunRepairResult(RunRepairOutcome.STORED, RunStatus.SUSPENDED, record_run_suspension(uow, command, now))
    same_checkpoint = uow.checkpoint(run.meta.run_id) == command.suspension
    return _settled_repair(uow, run, session, command.record, RunStatus.SUSPENDED, same_checkpoint)


def repair_run_terminal(uow: UnitOfWork, command: RunTerminal, now: datetime) -> RunRepairResult:
    run, session = _terminal_checks(uow, command)
    if not run.meta.status.is_terminal:
        return RunRepairResult(RunRepairOutcome.STORED, command.status, record_run_terminal(uow, command, now))
    return _settled_repair(uow, run, session, command.record, command.status, True)


def _settled_repair(
    uow: UnitOfWork, run: RunState, session: SessionState | None, record: RunRecord, status: RunStatus, same: bool
) -> RunRepairResult:
    """A repair of a run already closed: exactly this one (`already_stored`) or another; never an error."""
    stored = uow.record_by_key(run.meta.run_id, record.event_key)
    if (
        same
        and run.meta.status == status
        and run.terminal_key == record.event_key
        and stored is not None
        and stored.same_content(record)
    ):
        result = AppendResult(id=stored.id, inserted=False, session_status=session_status_of(session))
        return RunRepairResult(RunRepairOutcome.ALREADY_STORED, run.meta.status, result)
    return RunRepairResult(RunRepairOutcome.DIFFERENT_TERMINAL, run.meta.status)


# -- host session administration ----------------------------------------------


def create_session(uow: UnitOfWork, session_id: str, created_at: datetime | None) -> SessionState:
    if not session_id:
        raise fail("session id is required")
    if created_at is None:
        raise fail("created_at is required")
    session = uow.session(session_id)
    if session is not None:
        if session.purged:
            raise wrap(SessionPurgedError())
        if session.status != ACTIVE:
            raise wrap(SessionEndedError())
        return session
    session = SessionState(id=session_id, status=ACTIVE, created_at=created_at)
    uow.save_session(session)
    return session


def end_session(uow: UnitOfWork, session_id: str, ended_at: datetime | None) -> SessionState:
    if ended_at is None:
        raise fail("ended_at is required")
    session = usable_session(uow, session_id)
    if session.status == ACTIVE:
        session.status = ENDED
        session.ended_at = ended_at
        uow.save_session(session)
    return session


def reserve_purge(uow: UnitOfWork, session_id: str) -> bool:
    """Mark an ended session with no running run as purging; False when already purged.

    The reservation is what makes the purge permanent: from here on every
    operation naming the session sees it as purged, while its data is
    deleted in restartable batches.
    """
    session = uow.session(session_id)
    if session is None:
        raise wrap(SessionNotFoundError())
    if session.status == PURGED:
        return False
    if session.status == PURGING:
        return True
    if session.status == ACTIVE:
        raise wrap(SessionActiveError())
    if session.running_runs > 0:
        raise wrap(SessionHasActiveRunsError())
    session.status = PURGING
    uow.save_session(session)
    return True
