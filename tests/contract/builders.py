"""Commands shaped like goa-ai's reference fixtures (`rootStartCommand`, …)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cairn.runtime.model import (
    CANCELLATION_RECORD_TYPE,
    CHILD_RUN_LINKED,
    EMPTY_SEED_END_ID,
    RUN_COMPLETED,
    RUN_STARTED,
    RUN_SUSPENDED,
    ChildRunStart,
    OneShotChildRunStart,
    OneShotRunStart,
    PreparationOperation,
    RootRunStart,
    RunCancellation,
    RunRecord,
    RunStart,
    RunStatus,
    RunSuspension,
    RunSuspensionCommand,
    RunTerminal,
    SeedAppend,
    SeedDeclaration,
    SeedKind,
    SeedPublication,
    SeedRecord,
)

T0 = datetime(2026, 11, 29, 12, 0, 0, 123000, tzinfo=UTC)
DIGEST = bytes([1]) + bytes(31)
OTHER_DIGEST = bytes([2]) + bytes(31)
LABELS = {"site": "one"}
CHECKPOINT = b'{"version":"v6"}'


def payload(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def record(run: RunStart, key: str, type_: str, body: bytes, at: datetime | None = None) -> RunRecord:
    return RunRecord(
        event_key=key,
        run_id=run.run_id,
        agent_id=run.agent_id,
        session_id=run.session_id,
        type=type_,
        payload=body,
        timestamp=at or run.started_at,
    )


def run_start(
    run_id: str = "run",
    *,
    session: str = "session",
    agent: str = "agent",
    parent: str = "",
    predecessor: str = "",
    labels: dict | None = None,
    at: datetime = T0,
) -> RunStart:
    return RunStart(
        agent_id=agent,
        run_id=run_id,
        started_at=at,
        session_id=session,
        parent_run_id=parent,
        predecessor_run_id=predecessor,
        labels=LABELS if labels is None else labels,
    )


def started_record(run: RunStart, key: str = "started") -> RunRecord:
    body = {}
    if run.parent_run_id:
        body["parent_run_id"] = run.parent_run_id
    if run.predecessor_run_id:
        body["predecessor_run_id"] = run.predecessor_run_id
    if run.labels:
        body["labels"] = run.labels
    return record(run, key, RUN_STARTED, payload(body))


def intent_record(run: RunStart, key: str = "stopped", reason: str = "session_ended") -> RunRecord:
    return record(run, key, CANCELLATION_RECORD_TYPE, payload({"reason": reason}))


def root_start(
    run: RunStart | None = None, *, digest: bytes = DIGEST, started_key: str = "started", stop_key: str = "stopped"
) -> RootRunStart:
    run = run or run_start()
    return RootRunStart(
        request_digest=digest,
        run=run,
        started=started_record(run, started_key),
        cancellation=intent_record(run, stop_key),
    )


def link_record(
    child: RunStart, parent_agent: str = "agent", key: str | None = None, tool: str = "child", call: str = "tool-call"
) -> RunRecord:
    body = {"ToolName": tool, "ToolCallID": call, "ChildRunID": child.run_id, "ChildAgentID": child.agent_id}
    return RunRecord(
        event_key=key or f"link:{child.run_id}",
        run_id=child.parent_run_id,
        agent_id=parent_agent,
        session_id=child.session_id,
        type=CHILD_RUN_LINKED,
        payload=payload(body),
        timestamp=child.started_at,
    )


def child_start(
    child_id: str = "child",
    parent: str = "run",
    *,
    agent: str = "child-agent",
    digest: bytes = DIGEST,
    predecessor: str = "",
    call: str = "tool-call",
    at: datetime = T0,
    link_key: str | None = None,
    parent_agent: str = "agent",
) -> ChildRunStart:
    run = run_start(child_id, agent=agent, parent=parent, predecessor=predecessor, at=at)
    return ChildRunStart(
        request_digest=digest,
        run=run,
        parent_linked=link_record(run, parent_agent, key=link_key, call=call),
        started=started_record(run),
        cancellation=intent_record(run),
    )


def one_shot_start(run_id: str = "solo", *, digest: bytes = DIGEST, at: datetime = T0) -> OneShotRunStart:
    run = run_start(run_id, session="", at=at)
    return OneShotRunStart(request_digest=digest, run=run, started=started_record(run))


def one_shot_child_start(
    child_id: str = "solo-child", parent: str = "solo", *, digest: bytes = DIGEST, at: datetime = T0
) -> OneShotChildRunStart:
    run = run_start(child_id, session="", agent="child-agent", parent=parent, at=at)
    return OneShotChildRunStart(
        request_digest=digest, run=run, parent_linked=link_record(run), started=started_record(run)
    )


def completed_payload(status: RunStatus, labels: dict | None = None, reason: str = "") -> bytes:
    body: dict = {"labels": LABELS if labels is None else labels}
    if status == RunStatus.COMPLETED:
        body.update(status="success", phase="completed")
    elif status == RunStatus.FAILED:
        body.update(
            status="failed", phase="failed", failure={"message": "boom", "kind": "internal", "retryable": False}
        )
    else:
        body.update(status="canceled", phase="canceled", cancellation={"reason": reason or "engine_canceled"})
    return payload(body)


def terminal(
    run: RunStart,
    status: RunStatus = RunStatus.COMPLETED,
    *,
    key: str = "terminal",
    at: datetime | None = None,
    reason: str = "",
    body: bytes | None = None,
) -> RunTerminal:
    at = at or run.started_at + timedelta(seconds=1)
    return RunTerminal(
        run_id=run.run_id,
        status=status,
        record=record(run, key, RUN_COMPLETED, body or completed_payload(status, run.labels, reason), at),
    )


def suspension(
    run: RunStart,
    *,
    key: str = "suspended",
    suspension_id: str = "checkpoint",
    data: bytes = CHECKPOINT,
    at: datetime | None = None,
) -> RunSuspensionCommand:
    at = at or run.started_at + timedelta(seconds=1)
    body = payload({"SuspensionID": suspension_id, "Version": "v6", "PendingCount": 1, "RequiredTools": None})
    return RunSuspensionCommand(
        run_id=run.run_id,
        suspension=RunSuspension(id=suspension_id, data=data),
        record=record(run, key, RUN_SUSPENDED, body, at),
    )


def cancellation(run: RunStart, reason: str = "user_requested", key: str = "cancel") -> RunCancellation:
    return RunCancellation(
        run_id=run.run_id,
        reason=reason,
        record=record(
            run,
            key,
            CANCELLATION_RECORD_TYPE,
            payload({"reason": reason}),
            run.started_at + timedelta(milliseconds=500),
        ),
    )


def note(
    run: RunStart,
    key: str,
    body: bytes = b'{"text":"hi"}',
    type_: str = "assistant_message",
    at: datetime | None = None,
) -> RunRecord:
    return record(run, key, type_, body, at or run.started_at + timedelta(milliseconds=10))


def later(command, **changes):
    return replace(command, **changes)


# -- initial history (seeds) ---------------------------------------------------------

LITERAL = b'[{"role":"user","parts":[{"kind":"text","text":"new input"}]}]'
PREPARED = b"{}"


def declaration(
    run: RunStart,
    *,
    attempt: str = "attempt",
    kind: SeedKind = SeedKind.LITERAL,
    source: str = "",
    source_end: str = "",
    exclude_reasoning: bool = False,
) -> SeedDeclaration:
    return SeedDeclaration(
        agent_id=run.agent_id,
        run_id=run.run_id,
        session_id=run.session_id,
        command_id="command",
        attempt_id=attempt,
        kind=kind,
        source_run_id=source,
        source_end_id=source_end,
        exclude_reasoning=exclude_reasoning,
    )


def operation(d: SeedDeclaration) -> PreparationOperation:
    return PreparationOperation(agent_id=d.agent_id, run_id=d.run_id, session_id=d.session_id, command_id=d.command_id)


def seed_append(d: SeedDeclaration, key: str, previous: str, **variant) -> SeedAppend:
    return SeedAppend(
        run_id=d.run_id, attempt_id=d.attempt_id, record=SeedRecord(key=key, previous_id=previous, **variant)
    )


def complete(store, d: SeedDeclaration, history_end: str) -> SeedPublication:
    """goa-ai's `appendSeedTestCompletion`: the compiled start after the history, ready to publish."""
    end = store.append_run_seed(seed_append(d, "prepared", history_end, prepared=PREPARED))
    return SeedPublication(
        run_id=d.run_id, attempt_id=d.attempt_id, seed_end_id=history_end, end_id=end, prepared_bytes=len(PREPARED)
    )


def publish_literal(store, run: RunStart, messages: bytes = LITERAL) -> RunStart:
    """Publish a literal seed for `run`; the run start that attaches it."""
    d = declaration(run)
    store.begin_run_seed(d)
    end = store.append_run_seed(seed_append(d, "first", EMPTY_SEED_END_ID, messages=messages))
    store.publish_run_seed(complete(store, d, end))
    return replace(run, seed_end_id=end)
