"""The runtime store's methods as HTTP operations: one table, read by the
service routes (`cairn.api.routes.runtime`), the OpenAPI description and
`HttpRuntimeStore`, so none of them can drift from another.

A row names a `RuntimeStore` method, what the request body carries and what
the answer carries. The body is the command the method takes or, for a
method with plain parameters, an `Arguments` dataclass whose fields are
those parameters by name; the answer is the method's result or, for a
result that is not an object, a `Boxed` dataclass holding it. Adding a
method to the store is: the protocol method, the engine method, one row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from cairn.runtime.model import (
    MAX_SEED_PAGE_RECORDS,
    MAX_TRANSCRIPT_PAGE_RECORDS,
    AppendResult,
    ChildRunStart,
    ChildRunStartResult,
    OneShotChildRunStart,
    OneShotChildRunStartResult,
    OneShotRunStart,
    OneShotRunStartResult,
    PreparationAttempt,
    PreparationOperation,
    RootRunStart,
    RootRunStartResult,
    RunCancellation,
    RunMeta,
    RunPreparation,
    RunRecord,
    RunRecordPage,
    RunRepairResult,
    RunSeed,
    RunStatus,
    RunSuspension,
    RunSuspensionCommand,
    RunTerminal,
    SeedAppend,
    SeedDeclaration,
    SeedPage,
    SeedPublication,
    Session,
    SessionStatus,
    SynchronousRunStart,
)

if TYPE_CHECKING:
    from cairn.runtime.store import RuntimeStore


class Arguments:
    """A request whose fields are the store method's parameters, by name."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every one is a dataclass


class Boxed:
    """An answer holding the store method's result in its one field (`Done`: no field, no result)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every one is a dataclass

    @classmethod
    def box(cls, value: Any) -> Boxed:
        return cls(**{item.name: value for item in fields(cls)})

    def unbox(self) -> Any:
        return next((getattr(self, item.name) for item in fields(self)), None)


@dataclass(frozen=True)
class SessionRef(Arguments):
    session_id: str


@dataclass(frozen=True)
class CreateSession(Arguments):
    session_id: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class EndSession(Arguments):
    session_id: str
    ended_at: datetime | None = None


@dataclass(frozen=True)
class RunsBySession(Arguments):
    session_id: str
    statuses: list[RunStatus] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The store takes any iterable of statuses; the body carries a list.
        object.__setattr__(self, "statuses", list(self.statuses))


@dataclass(frozen=True)
class RunRef(Arguments):
    run_id: str


@dataclass(frozen=True)
class RunRecordsQuery(Arguments):
    run_id: str
    cursor: str = ""
    limit: int = 100


@dataclass(frozen=True)
class SessionRecordsQuery(Arguments):
    session_id: str
    cursor: str = ""
    limit: int = 100


@dataclass(frozen=True)
class TranscriptQuery(Arguments):
    run_id: str
    through_record_id: str
    after_record_id: str = ""
    limit: int = MAX_TRANSCRIPT_PAGE_RECORDS


@dataclass(frozen=True)
class SeedRef(Arguments):
    run_id: str
    end_id: str


@dataclass(frozen=True)
class SeedRecordsQuery(Arguments):
    run_id: str
    end_id: str
    after_id: str = ""
    limit: int = MAX_SEED_PAGE_RECORDS


@dataclass(frozen=True)
class SeedPosition(Boxed):
    id: str


@dataclass(frozen=True)
class PreparationFound(Boxed):
    """The accepted body, or null when there is none (goa-ai's `found == false`)."""

    preparation: RunPreparation | None


@dataclass(frozen=True)
class StatusResult(Boxed):
    status: SessionStatus


@dataclass(frozen=True)
class RunList(Boxed):
    runs: list[RunMeta]


@dataclass(frozen=True)
class Done(Boxed):
    """An operation with nothing to return."""


@dataclass(frozen=True)
class Method:
    """One `RuntimeStore` method as an HTTP operation: its name, request body and answer."""

    name: str
    request: type
    result: type

    def request_for(self, arguments: Mapping[str, Any]) -> Any:
        """The request body for the store method's arguments, given by parameter name."""
        if issubclass(self.request, Arguments):
            return self.request(**arguments)
        (command,) = arguments.values()
        return command

    def call(self, store: RuntimeStore, request: Any) -> Any:
        """Run the method on `store` with a decoded request; what the answer carries."""
        operation = getattr(store, self.name)
        if isinstance(request, Arguments):
            value = operation(**{item.name: getattr(request, item.name) for item in fields(request)})
        else:
            value = operation(request)
        return self.result.box(value) if issubclass(self.result, Boxed) else value

    def returned(self, answer: Any) -> Any:
        """What the store method returns, from its decoded answer."""
        return answer.unbox() if isinstance(answer, Boxed) else answer


METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        # sessions
        Method("create_session", CreateSession, Session),
        Method("load_session", SessionRef, Session),
        Method("load_session_status", SessionRef, StatusResult),
        Method("end_session", EndSession, Session),
        Method("purge_session", SessionRef, Done),
        Method("list_runs_by_session", RunsBySession, RunList),
        # initial history and preparations
        Method("begin_run_seed", SeedDeclaration, RunSeed),
        Method("append_run_seed", SeedAppend, SeedPosition),
        Method("publish_run_seed", SeedPublication, Done),
        Method("find_run_preparation", PreparationOperation, PreparationFound),
        Method("settle_run_preparation", PreparationAttempt, PreparationFound),
        Method("list_run_preparation_records", SeedRecordsQuery, SeedPage),
        Method("load_run_seed", SeedRef, RunSeed),
        Method("list_run_seed_records", SeedRecordsQuery, SeedPage),
        # starts and records
        Method("start_root_run", RootRunStart, RootRunStartResult),
        Method("start_child_run", ChildRunStart, ChildRunStartResult),
        Method("start_one_shot_run", OneShotRunStart, OneShotRunStartResult),
        Method("start_one_shot_child_run", OneShotChildRunStart, OneShotChildRunStartResult),
        Method("start_synchronous_run", SynchronousRunStart, OneShotRunStartResult),
        Method("append_run_record", RunRecord, AppendResult),
        Method("record_run_cancellation", RunCancellation, AppendResult),
        Method("record_run_suspension", RunSuspensionCommand, AppendResult),
        Method("record_run_terminal", RunTerminal, AppendResult),
        Method("repair_run_suspension", RunSuspensionCommand, RunRepairResult),
        Method("repair_run_terminal", RunTerminal, RunRepairResult),
        # reads
        Method("load_run", RunRef, RunMeta),
        Method("load_run_suspension", RunRef, RunSuspension),
        Method("list_run_records", RunRecordsQuery, RunRecordPage),
        Method("list_session_run_records", SessionRecordsQuery, RunRecordPage),
        Method("list_run_transcript_records", TranscriptQuery, RunRecordPage),
    )
}
