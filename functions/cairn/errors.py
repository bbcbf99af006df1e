"""Errors a client can cause or must react to, each with a stable code.

Each class is listed once, here, with its code and the HTTP status the API
answers it with (`http_status`); use cases raise them and the API edge
(`cairn.api.errors`) turns one into `{"error": {"code": ..., "message": ...,
**details}}` with that status and its headers. The Python SDK
(`cairn.client`) rebuilds the same classes from that body by code
(`CairnError.for_code`), so `except RevisionConflict` reads the same on either
side of the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal


class CairnError(Exception):
    """Base of every error with a stable, client-visible code."""

    code = "bad_request"
    # The HTTP status the API answers this error with (a subclass names its own where it differs).
    http_status = 400
    # The HTTP status of the answer the SDK rebuilt this error from; None for
    # an error raised in this process.
    status: int | None = None
    # Each class that names a code of its own, by that code: how the SDK rebuilds an answer.
    _by_code: ClassVar[dict[str, type[CairnError]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in vars(cls):
            CairnError._by_code[cls.code] = cls

    @classmethod
    def for_code(cls, code: str) -> type[CairnError] | None:
        """The class whose own code is `code`, if one is known."""
        return CairnError._by_code.get(code)

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(CairnError):
    code = "invalid_request"


class InvalidJson(CairnError):
    code = "invalid_json"


class Unauthorized(CairnError):
    """Wrong token, unknown, expired or deleted address: deliberately one answer."""

    code = "unauthorized"
    http_status = 401

    def __init__(self, message: str = "Missing or invalid credentials for this address.") -> None:
        super().__init__(message)


class SignatureInvalid(CairnError):
    """An inbox post failed every provider signature check its address registered; `reasons` by kind."""

    code = "signature_invalid"
    http_status = 401


class NotFound(CairnError):
    code = "not_found"
    http_status = 404


class RevisionConflict(CairnError):
    """A compare-and-set lost: `current_revision` (or `conflicts`) says what is there now."""

    code = "revision_conflict"
    http_status = 409

    @property
    def current_revision(self) -> int | None:
        """The key's revision now (None: it does not exist); set for single-key writes."""
        return self.details.get("current_revision")


class StateLimitExceeded(CairnError):
    """Too many keys or too many bytes in an address's state; `limit` says which."""

    code = "state_limit_exceeded"
    http_status = 409

    # Too many keys is a conflict with what is stored; too many bytes, a body too large.
    STATUS_BY_LIMIT: ClassVar[dict[str, int]] = {"keys": 409, "bytes": 413}

    def __init__(self, message: str, *, limit: Literal["keys", "bytes"], **details: Any) -> None:
        super().__init__(message, **details)
        self.limit = limit
        self.http_status = self.STATUS_BY_LIMIT[limit]


class QuotaExceeded(CairnError):
    code = "quota_exceeded"
    http_status = 409


class PayloadTooLarge(CairnError):
    code = "payload_too_large"
    http_status = 413


class StorageLimitExceeded(CairnError):
    """A write would take an address past the bytes it may store (its files and sessions)."""

    code = "storage_limit_exceeded"
    http_status = 413


class CrossOriginRefused(CairnError):
    """A browser's preflight for a route that no page of another origin may call."""

    code = "cross_origin_refused"
    http_status = 403


class UnsupportedMediaType(CairnError):
    code = "unsupported_media_type"
    http_status = 415


class StreamUnavailable(CairnError):
    """An event stream was asked of a server process that can only answer buffered."""

    code = "stream_unavailable"
    http_status = 406


class AttachmentUnavailable(CairnError):
    """The stored message an attachment came from has expired or was removed."""

    code = "attachment_unavailable"
    http_status = 410


class IdempotencyKeyReused(CairnError):
    code = "idempotency_key_reused"
    http_status = 422


class IdempotencyKeyNotRandom(InvalidRequest):
    """A provisioning `Idempotency-Key` that no random draw would give (its address's credentials derive from it)."""

    code = "idempotency_key_not_random"


class RetryLater(CairnError):
    """Base of the refusals that pass once `retry_after` seconds have gone by."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, retry_after_seconds=retry_after)
        self.retry_after = retry_after


class RateLimited(RetryLater):
    code = "rate_limited"
    http_status = 429


class TooManyHeldReads(RateLimited):
    """The address already holds as many event streams, or waiting long-polls, as it may."""

    code = "too_many_held_reads"


class Unavailable(RetryLater):
    """The store is throttled or unreachable: safe to retry the same request."""

    code = "temporarily_unavailable"
    http_status = 503

    def __init__(self, message: str = "Storage is busy; retry shortly.", *, retry_after: int = 1) -> None:
        super().__init__(message, retry_after=retry_after)


class OutboundNotConfigured(CairnError):
    """This deployment has no way to send mail."""

    code = "outbound_not_configured"
    http_status = 409

    def __init__(self, message: str = "Outbound email is not configured on this server.", **details: Any) -> None:
        super().__init__(message, **details)


class UnknownRecipient(CairnError):
    """The recipient is not one of the address's contacts."""

    code = "unknown_recipient"
    http_status = 422


class MailRefused(CairnError):
    """The carrier refused a message for good (the recipient, or the sender's standing): asking again cannot help."""

    code = "mail_refused"
    http_status = 422


class RecipientNotVerified(CairnError):
    """The recipient is a contact whose code has not been confirmed."""

    code = "recipient_not_verified"
    http_status = 409


class TooManyRecipients(CairnError):
    code = "too_many_recipients"


class HeaderInjection(CairnError):
    """A line break (or another control character) where a header value goes."""

    code = "header_injection"


class PlainTextOnly(CairnError):
    """HTML, attachments or another non-text part in an outbound message."""

    code = "plain_text_only"


class InvalidReplyTo(CairnError):
    """`reply_to_event_id` is not a retained mail this address received."""

    code = "invalid_reply_to_event"
    http_status = 422


class ContactLimitReached(CairnError):
    code = "contact_limit_reached"
    http_status = 409


class WrongCode(CairnError):
    code = "wrong_code"


class TooManyAttempts(CairnError):
    """Every attempt at the current code is used: ask for a new one."""

    code = "too_many_attempts"
    http_status = 409


class CodeExpired(CairnError):
    code = "code_expired"
    http_status = 409


class TargetRefused(InvalidRequest):
    """A subscription target this deployment will not deliver to (URL rules, ARN allow-list)."""

    code = "target_refused"


class SubscriptionLimitExceeded(QuotaExceeded):
    code = "subscription_limit_exceeded"


class SubscriptionNotFound(NotFound):
    code = "subscription_not_found"


class WakeupRefused(CairnError):
    """A Cairn wake-up posted to a Cairn inbox: refused for good, which ends the subscription that sent it."""

    code = "wakeup_refused"
    http_status = 410


class CheckpointStale(CairnError):
    """A LangGraph checkpoint put from a checkpoint that is no longer its thread's head.

    Another writer continued the thread first: `head` is the checkpoint it
    holds now (None: the thread has none), `parent_id` the one this writer
    continued from. Nothing was stored; the writer's run should stop.
    """

    code = "checkpoint_stale"
    http_status = 409


class CheckpointPartMissing(CairnError):
    """A checkpoint or write names an uploaded part that is not there (never uploaded, or its thread deleted)."""

    code = "checkpoint_part_missing"
    http_status = 409


class CheckpointThreadExists(CairnError):
    """A LangGraph thread copy whose target thread has checkpoints already; nothing was copied over them."""

    code = "checkpoint_thread_exists"
    http_status = 409


class StoreVersionConflict(CairnError):
    """A LangGraph store put that named the version it read, after the item moved on.

    `current_version` is the item's version now (0: there is none); nothing
    was stored.
    """

    code = "store_version_conflict"
    http_status = 409

    @property
    def current_version(self) -> int:
        return int(self.details.get("current_version") or 0)


class SessionConflict(CairnError):
    """A Strands session write from a run that no longer has the session to itself.

    `reason` says why: `moved` (another run wrote since this one read;
    `current_version` is the version now), `held` (another run is writing it
    and holds it until `held_until`, epoch seconds) or `exists` (it was
    already created). Nothing was stored; the run should stop.
    """

    code = "session_conflict"
    http_status = 409


# A validation error names at most this many of a request's problems, each in at most `_MAX_PROBLEM_CHARS`
# characters: a request with hundreds of thousands of problems (unknown fields) had made an answer of tens
# of megabytes, naming each twice and whole.
MAX_NAMED_PROBLEMS = 20
_MAX_PROBLEM_CHARS = 200


def named_problems(problems: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, str]], str]:
    """The first problems of a validation (pydantic's `errors()`) as `fields`, and a one-line summary of them."""
    fields = [
        {"field": _cut(".".join(map(str, problem.get("loc", ())))), "message": _cut(str(problem.get("msg", "")))}
        for problem in problems[:MAX_NAMED_PROBLEMS]
    ]
    summary = "; ".join(f"{item['field']}: {item['message']}" for item in fields)
    if len(problems) > MAX_NAMED_PROBLEMS:
        summary += f"; and {len(problems) - MAX_NAMED_PROBLEMS} more"
    return fields, summary


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_PROBLEM_CHARS else text[: _MAX_PROBLEM_CHARS - 1] + "…"
