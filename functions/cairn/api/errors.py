"""Every failure leaves as `{"error": {"code", "message", ...}}`.

Client mistakes get their stable code, storage trouble a 503 with
`Retry-After`, and anything unforeseen a logged 500 that reveals nothing.
Cairn's own errors declare their status with their code (`cairn.errors`);
the runtime store's, which follow goa-ai's contract, are given theirs here.
Headers (`Retry-After`) and the body's form are decided here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from botocore.exceptions import BotoCoreError, ClientError

from cairn import jsontext
from cairn.errors import CairnError, RetryLater, StateLimitExceeded, Unavailable, named_problems
from cairn.runtime import errors as runtime
from cairn.runtime.errors import ContractError, RuntimeStoreError, RuntimeStoreUnavailable
from cairn.runtime.wire import WireError
from cairn.transcript.errors import InvalidHistoryError

if TYPE_CHECKING:
    from cairn.api.resolver import ConcurrentRestResolver

logger = Logger(service="cairn")

# The runtime store's errors (goa-ai's contract, `cairn.runtime.errors`) and the transcript's answer
# with these statuses; a class not listed answers as its nearest listed base. Cairn's own errors
# carry theirs (`CairnError.http_status`).
_RUNTIME_CLASSES_BY_STATUS: dict[int, tuple[type[Exception], ...]] = {
    400: (
        RuntimeStoreError,
        runtime.ParentRunIDRequiredError,
        runtime.ChildRunIDRequiredError,
        runtime.ChildAgentIDRequiredError,
        runtime.ChildSessionIDRequiredError,
        runtime.InvalidTranscriptPositionError,
    ),
    404: (
        runtime.SessionNotFoundError,
        runtime.RunNotFoundError,
        runtime.RunSuspensionNotFoundError,
        runtime.SeedNotFoundError,
    ),
    409: (
        runtime.SessionEndedError,
        runtime.SessionActiveError,
        runtime.SessionHasActiveRunsError,
        runtime.RunConflictError,
        runtime.RunTerminalConflictError,
        runtime.RunCancellationConflictError,
        runtime.RunNotActiveError,
        runtime.RunSuspensionConflictError,
        runtime.RunSessionMismatchError,
        runtime.RunRecordOwnerMismatchError,
        runtime.EventConflictError,
        runtime.SeedConflictError,
        runtime.SeedNotPublishedError,
        runtime.PreparationAbandonedError,
    ),
    410: (runtime.SessionPurgedError,),
    # A contract error cannot succeed by repeating it, however well-formed.
    422: (ContractError, InvalidHistoryError),
    503: (RuntimeStoreUnavailable,),
}
_STATUS_OF_CLASS = {kind: status for status, kinds in _RUNTIME_CLASSES_BY_STATUS.items() for kind in kinds}

# DynamoDB answers that mean "busy or unreachable", never "your request is wrong".
_TRANSIENT_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
}


def status_for(kind: type[Exception]) -> int:
    """The HTTP status an error of class `kind` answers with."""
    if issubclass(kind, CairnError):
        return kind.http_status
    return next(_STATUS_OF_CLASS[base] for base in kind.__mro__ if base in _STATUS_OF_CLASS)


def documented_codes() -> list[tuple[str, str]]:
    """Each client-visible error code with the status it answers with, for the guides."""
    codes: dict[str, str] = {}
    pending: list[type[CairnError]] = [CairnError]
    while pending:
        kind = pending.pop(0)
        pending.extend(kind.__subclasses__())
        # Only the server's own: the SDK adds client-side codes of its own.
        if "code" not in vars(kind) or kind.__module__ != CairnError.__module__:
            continue
        if kind is StateLimitExceeded:
            by_limit = StateLimitExceeded.STATUS_BY_LIMIT.items()
            codes[kind.code] = " / ".join(f"{status} ({limit})" for limit, status in by_limit)
        else:
            codes[kind.code] = str(status_for(kind))
    return sorted(codes.items())


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **details: Any
) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=jsontext.canonical({"error": {"code": code, "message": message, **details}}),
        headers=headers or {},
    )


def cairn_error_response(error: CairnError) -> Response[str]:
    """A use case's refusal, with its status and, for a refusal that passes in time, `Retry-After`."""
    headers = {"Retry-After": str(error.retry_after)} if isinstance(error, RetryLater) else None
    return error_response(error.http_status, error.code, error.message, headers, **error.details)


def register_error_handlers(app: ConcurrentRestResolver) -> None:
    @app.exception_handler(CairnError)
    def cairn_error(error: CairnError) -> Response[str]:
        return cairn_error_response(error)

    @app.exception_handler(RuntimeStoreError)
    def runtime_error(error: RuntimeStoreError) -> Response[str]:
        """Sentinels keep their code; a ContractError names its cause so clients rebuild both."""
        cause = error.cause if isinstance(error, ContractError) else error
        named = cause if isinstance(cause, RuntimeStoreError) else error
        code, status = named.code, status_for(type(named))
        headers = {"Retry-After": "1"} if isinstance(error, RuntimeStoreUnavailable) else None
        return error_response(status, code, str(error), headers, contract=isinstance(error, ContractError))

    @app.exception_handler(WireError)
    def wire_error(error: WireError) -> Response[str]:
        # A malformed command is a contract error: repeating it cannot succeed.
        return error_response(422, "invalid_request", str(error), contract=True)

    @app.exception_handler(RequestValidationError)
    def validation_error(error: RequestValidationError) -> Response[str]:
        problems = error.errors()
        if any(problem.get("type") == "json_invalid" for problem in problems):
            return error_response(400, "invalid_json", "The body is not valid JSON.")
        fields, summary = named_problems(problems)
        return error_response(422, "invalid_request", f"Invalid request: {summary}", fields=fields)

    @app.exception_handler(UnicodeDecodeError)
    def undecodable_body(_: UnicodeDecodeError) -> Response[str]:
        # Request validation decodes the body as UTF-8 before parsing it as JSON; bytes that are not
        # UTF-8 cannot be JSON, so they get the same answer as any other unparsable body.
        return error_response(400, "invalid_json", "The body is not valid UTF-8.")

    @app.exception_handler(NotFoundError)
    def not_found(_: NotFoundError) -> Response[str]:
        return error_response(404, "not_found", "No such route.")

    # A list, not a tuple: Powertools registers each class of a list, but a tuple as one key.
    @app.exception_handler([ClientError, BotoCoreError])
    def storage_error(error: Exception) -> Response[str]:
        code = error.response.get("Error", {}).get("Code", "") if isinstance(error, ClientError) else ""
        if isinstance(error, BotoCoreError) or code in _TRANSIENT_CODES:
            logger.warning("storage unavailable", extra={"error_code": code or type(error).__name__})
            return cairn_error_response(Unavailable())
        logger.exception("storage error")
        return error_response(500, "internal_error", "Internal error.")

    @app.exception_handler(Exception)
    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        return error_response(500, "internal_error", "Internal error.")
