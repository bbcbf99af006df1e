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

from cairn.runtime import model

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
    statuses: list[model.RunStatus] = field(default_factory=list)

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
    limit: int = model.MAX_TRANSCRIPT_PAGE_RECORDS


@dataclass(frozen=True)
class SeedRef(Arguments):
    run_id: str
    end_id: str


@dataclass(frozen=True)
class SeedRecordsQuery(Arguments):
    run_id: str
    end_id: str
    after_id: str = ""
    limit: int = model.MAX_SEED_PAGE_RECORDS


@dataclass(frozen=True)
class SeedPosition(Boxed):
    id: str


@dataclass(frozen=True)
class PreparationFound(Boxed):
    """The accepted body, or null when there is none (goa-ai's `found == false`)."""

    preparation: model.RunPreparation | None


@dataclass(frozen=True)
class StatusResult(Boxed):
    status: model.SessionStatus


@dataclass(frozen=True)
class RunList(Boxed):
    runs: list[model.RunMeta]


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
        Method("create_session", CreateSession, model.Session),
        Method("load_session", SessionRef, model.Session),
        Method("load_session_status", SessionRef, StatusResult),
        Method("end_session", EndSession, model.Session),
        Method("purge_session", SessionRef, Done),
        Method("list_runs_by_session", RunsBySession, RunList),
        # initial history and preparations
        Method("begin_run_seed", model.SeedDeclaration, model.RunSeed),
        Method("append_run_seed", model.SeedAppend, SeedPosition),
        Method("publish_run_seed", model.SeedPublication, Done),
        Method("find_run_preparation", model.PreparationOperation, PreparationFound),
        Method("settle_run_preparation", model.PreparationAttempt, PreparationFound),
        Method("list_run_preparation_records", SeedRecordsQuery, model.SeedPage),
        Method("load_run_seed", SeedRef, model.RunSeed),
        Method("list_run_seed_records", SeedRecordsQuery, model.SeedPage),
        # starts and records
        Method("start_root_run", model.RootRunStart, model.RootRunStartResult),
        Method("start_child_run", model.ChildRunStart, model.ChildRunStartResult),
        Method("start_one_shot_run", model.OneShotRunStart, model.OneShotRunStartResult),
        Method("start_one_shot_child_run", model.OneShotChildRunStart, model.OneShotChildRunStartResult),
        Method("start_synchronous_run", model.SynchronousRunStart, model.OneShotRunStartResult),
        Method("append_run_record", model.RunRecord, model.AppendResult),
        Method("record_run_cancellation", model.RunCancellation, model.AppendResult),
        Method("record_run_suspension", model.RunSuspensionCommand, model.AppendResult),
        Method("record_run_terminal", model.RunTerminal, model.AppendResult),
        Method("repair_run_suspension", model.RunSuspensionCommand, model.RunRepairResult),
        Method("repair_run_terminal", model.RunTerminal, model.RunRepairResult),
        # reads
        Method("load_run", RunRef, model.RunMeta),
        Method("load_run_suspension", RunRef, model.RunSuspension),
        Method("list_run_records", RunRecordsQuery, model.RunRecordPage),
        Method("list_session_run_records", SessionRecordsQuery, model.RunRecordPage),
        Method("list_run_transcript_records", TranscriptQuery, model.RunRecordPage),
    )
}
