"""One exception per goa-ai sentinel, with goa-ai's exact messages.

`ContractError` marks a mutation that repeating cannot change (the caller
must not retry it); it wraps the sentinel it was caused by, and
`is_error(error, SessionPurgedError)` looks through the wrapper the way Go's
`errors.Is` does. Transient storage trouble is never wrapped.
"""

from __future__ import annotations


class RuntimeStoreError(Exception):
    """Base of every runtime store error; `code` is its stable, client-visible code."""

    code = "runtime_error"
    message = ""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.message)


class ContractError(RuntimeStoreError):
    """A caller mistake or stored-state conflict; `cause` is the sentinel, if any."""

    code = "contract_error"

    def __init__(self, cause: BaseException | str, message: str | None = None) -> None:
        self.cause = cause if isinstance(cause, BaseException) else None
        super().__init__(message or str(cause))
        if self.cause is not None:
            self.__cause__ = self.cause


class RuntimeStoreUnavailable(RuntimeStoreError):
    """Transient: the store is busy or unreachable; retrying is safe."""

    code = "temporarily_unavailable"
    message = "runtime store temporarily unavailable"


def _sentinel(name: str, code: str, message: str) -> type[RuntimeStoreError]:
    return type(name, (RuntimeStoreError,), {"code": code, "message": message, "__doc__": message})


SessionNotFoundError = _sentinel("SessionNotFoundError", "session_not_found", "session not found")
SessionEndedError = _sentinel("SessionEndedError", "session_ended", "session ended")
SessionPurgedError = _sentinel("SessionPurgedError", "session_purged", "session purged")
SessionActiveError = _sentinel("SessionActiveError", "session_active", "session is active")
SessionHasActiveRunsError = _sentinel("SessionHasActiveRunsError", "session_has_active_runs", "session has active runs")
RunNotFoundError = _sentinel("RunNotFoundError", "run_not_found", "run not found")
RunConflictError = _sentinel("RunConflictError", "run_conflict", "run metadata conflict")
RunTerminalConflictError = _sentinel(
    "RunTerminalConflictError", "run_terminal_conflict", "run terminal outcome conflict"
)
RunCancellationConflictError = _sentinel(
    "RunCancellationConflictError", "run_cancellation_conflict", "run cancellation reason conflict"
)
RunNotActiveError = _sentinel("RunNotActiveError", "run_not_active", "run is not active")
RunSuspensionNotFoundError = _sentinel(
    "RunSuspensionNotFoundError", "run_suspension_not_found", "run suspension not found"
)
RunSuspensionConflictError = _sentinel(
    "RunSuspensionConflictError", "run_suspension_conflict", "run suspension conflict"
)
ParentRunIDRequiredError = _sentinel("ParentRunIDRequiredError", "parent_run_id_required", "parent run id is required")
ChildRunIDRequiredError = _sentinel("ChildRunIDRequiredError", "child_run_id_required", "child run id is required")
ChildAgentIDRequiredError = _sentinel(
    "ChildAgentIDRequiredError", "child_agent_id_required", "child agent id is required"
)
ChildSessionIDRequiredError = _sentinel(
    "ChildSessionIDRequiredError", "child_session_id_required", "child session id is required"
)
RunSessionMismatchError = _sentinel(
    "RunSessionMismatchError",
    "run_session_mismatch",
    "parent and child runs must belong to the same session",
)
RunRecordOwnerMismatchError = _sentinel(
    "RunRecordOwnerMismatchError", "run_record_owner_mismatch", "run record owner does not match stored run"
)
InvalidTranscriptPositionError = _sentinel(
    "InvalidTranscriptPositionError", "invalid_transcript_position", "invalid transcript position"
)
EventConflictError = _sentinel("EventConflictError", "event_conflict", "runlog: event conflict")
SeedNotFoundError = _sentinel("SeedNotFoundError", "seed_not_found", "run seed not found")
SeedConflictError = _sentinel("SeedConflictError", "seed_conflict", "run seed conflict")
SeedNotPublishedError = _sentinel("SeedNotPublishedError", "seed_not_published", "run seed is not published")
PreparationAbandonedError = _sentinel(
    "PreparationAbandonedError", "preparation_abandoned", "run preparation attempt abandoned"
)


def event_conflict(run_id: str, event_key: str) -> RuntimeStoreError:
    """goa-ai's `*runlog.EventConflictError`: names the run and key."""
    return EventConflictError(f'run "{run_id}" event key "{event_key}": runlog: event conflict')


def wrap(cause: BaseException | str, prefix: str = "") -> ContractError:
    """`ContractError` around `cause`, its message optionally prefixed (`started record: `)."""
    if isinstance(cause, ContractError):
        return ContractError(cause.cause or str(cause), f"{prefix}{cause}") if prefix else cause
    return ContractError(cause, f"{prefix}{cause}")


def is_error(error: BaseException | None, kind: type[BaseException]) -> bool:
    """Go's `errors.Is`: the error or anything it wraps is of `kind`."""
    while error is not None:
        if isinstance(error, kind):
            return True
        error = getattr(error, "cause", None) or error.__cause__
    return False


SENTINELS: dict[str, type[RuntimeStoreError]] = {
    kind.code: kind
    for kind in (
        SessionNotFoundError,
        SessionEndedError,
        SessionPurgedError,
        SessionActiveError,
        SessionHasActiveRunsError,
        RunNotFoundError,
        RunConflictError,
        RunTerminalConflictError,
        RunCancellationConflictError,
        RunNotActiveError,
        RunSuspensionNotFoundError,
        RunSuspensionConflictError,
        ParentRunIDRequiredError,
        ChildRunIDRequiredError,
        ChildAgentIDRequiredError,
        ChildSessionIDRequiredError,
        RunSessionMismatchError,
        RunRecordOwnerMismatchError,
        InvalidTranscriptPositionError,
        EventConflictError,
        SeedNotFoundError,
        SeedConflictError,
        SeedNotPublishedError,
        PreparationAbandonedError,
        RuntimeStoreUnavailable,
    )
}
