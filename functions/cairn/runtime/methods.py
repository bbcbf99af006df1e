"""The runtime store's methods as HTTP operations: one table, read by both
the service routes and `HttpRuntimeStore`, so the two cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cairn.runtime.model import (
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
    RunRecordPage,
    RunRepairResult,
    RunStatus,
    RunSuspension,
    RunSuspensionCommand,
    RunTerminal,
    Session,
    SessionStatus,
)


@dataclass(frozen=True)
class SessionRef:
    session_id: str


@dataclass(frozen=True)
class CreateSession:
    session_id: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class EndSession:
    session_id: str
    ended_at: datetime | None = None


@dataclass(frozen=True)
class RunsBySession:
    session_id: str
    statuses: list[RunStatus] = field(default_factory=list)


@dataclass(frozen=True)
class RunRef:
    run_id: str


@dataclass(frozen=True)
class RunRecordsQuery:
    run_id: str
    cursor: str = ""
    limit: int = 100


@dataclass(frozen=True)
class SessionRecordsQuery:
    session_id: str
    cursor: str = ""
    limit: int = 100


@dataclass(frozen=True)
class TranscriptQuery:
    run_id: str
    through_record_id: str
    after_record_id: str = ""
    limit: int = 512


@dataclass(frozen=True)
class StatusResult:
    status: SessionStatus


@dataclass(frozen=True)
class RunList:
    runs: list[RunMeta]


@dataclass(frozen=True)
class Done:
    """An operation with nothing to return."""


@dataclass(frozen=True)
class Method:
    name: str
    request: type
    result: type
    call: Callable[[Any, Any], Any]


METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        Method("create_session", CreateSession, Session, lambda s, r: s.create_session(r.session_id, r.created_at)),
        Method("load_session", SessionRef, Session, lambda s, r: s.load_session(r.session_id)),
        Method(
            "load_session_status",
            SessionRef,
            StatusResult,
            lambda s, r: StatusResult(s.load_session_status(r.session_id)),
        ),
        Method("end_session", EndSession, Session, lambda s, r: s.end_session(r.session_id, r.ended_at)),
        Method("purge_session", SessionRef, Done, lambda s, r: s.purge_session(r.session_id) or Done()),
        Method(
            "list_runs_by_session",
            RunsBySession,
            RunList,
            lambda s, r: RunList(s.list_runs_by_session(r.session_id, r.statuses)),
        ),
        Method("start_root_run", RootRunStart, RootRunStartResult, lambda s, r: s.start_root_run(r)),
        Method("start_child_run", ChildRunStart, ChildRunStartResult, lambda s, r: s.start_child_run(r)),
        Method("start_one_shot_run", OneShotRunStart, OneShotRunStartResult, lambda s, r: s.start_one_shot_run(r)),
        Method(
            "start_one_shot_child_run",
            OneShotChildRunStart,
            OneShotChildRunStartResult,
            lambda s, r: s.start_one_shot_child_run(r),
        ),
        Method("append_run_record", RunRecord, AppendResult, lambda s, r: s.append_run_record(r)),
        Method("record_run_cancellation", RunCancellation, AppendResult, lambda s, r: s.record_run_cancellation(r)),
        Method("record_run_suspension", RunSuspensionCommand, AppendResult, lambda s, r: s.record_run_suspension(r)),
        Method("record_run_terminal", RunTerminal, AppendResult, lambda s, r: s.record_run_terminal(r)),
        Method(
            "repair_run_suspension", RunSuspensionCommand, RunRepairResult, lambda s, r: s.repair_run_suspension(r)
        ),
        Method("repair_run_terminal", RunTerminal, RunRepairResult, lambda s, r: s.repair_run_terminal(r)),
        Method("load_run", RunRef, RunMeta, lambda s, r: s.load_run(r.run_id)),
        Method("load_run_suspension", RunRef, RunSuspension, lambda s, r: s.load_run_suspension(r.run_id)),
        Method(
            "list_run_records",
            RunRecordsQuery,
            RunRecordPage,
            lambda s, r: s.list_run_records(r.run_id, r.cursor, r.limit),
        ),
        Method(
            "list_session_run_records",
            SessionRecordsQuery,
            RunRecordPage,
            lambda s, r: s.list_session_run_records(r.session_id, r.cursor, r.limit),
        ),
        Method(
            "list_run_transcript_records",
            TranscriptQuery,
            RunRecordPage,
            lambda s, r: s.list_run_transcript_records(r.run_id, r.through_record_id, r.after_record_id, r.limit),
        ),
    )
}
