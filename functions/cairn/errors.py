"""Errors a client can cause or must react to, each with a stable code.

The HTTP edge turns every `CairnError` into
`{"error": {"code": ..., "message": ..., **details}}` with its status; use
cases raise them and know nothing of HTTP beyond the status number. The
Python SDK (`cairn.client`) rebuilds the same classes from that body, so
`except RevisionConflict` reads the same on either side of the wire.
"""

from __future__ import annotations

from typing import Any


class CairnError(Exception):
    """Base of every error with a stable, client-visible code."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}


class InvalidRequest(CairnError):
    status = 400
    code = "invalid_request"


class InvalidJson(CairnError):
    status = 400
    code = "invalid_json"


class Unauthorized(CairnError):
    """Wrong token, unknown, expired or deleted address: deliberately one answer."""

    status = 401
    code = "unauthorized"

    def __init__(self, message: str = "Missing or invalid credentials for this address.") -> None:
        super().__init__(message)


class NotFound(CairnError):
    status = 404
    code = "not_found"


class RevisionConflict(CairnError):
    """A compare-and-set lost: `current_revision` (or `conflicts`) says what is there now."""

    status = 409
    code = "revision_conflict"

    @property
    def current_revision(self) -> int | None:
        """The key's revision now (None: it does not exist); set for single-key writes."""
        return self.details.get("current_revision")


class StateLimitExceeded(CairnError):
    """Too many keys (409) or too many bytes (413) in an address's state."""

    code = "state_limit_exceeded"

    def __init__(self, message: str, *, status: int, **details: Any) -> None:
        super().__init__(message, **details)
        self.status = status


class QuotaExceeded(CairnError):
    status = 409
    code = "quota_exceeded"


class PayloadTooLarge(CairnError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(CairnError):
    status = 415
    code = "unsupported_media_type"


class AttachmentUnavailable(CairnError):
    """The stored message an attachment came from has expired or was removed."""

    status = 410
    code = "attachment_unavailable"


class IdempotencyKeyReused(CairnError):
    status = 422
    code = "idempotency_key_reused"


class RateLimited(CairnError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(
            message,
            headers={"Retry-After": str(retry_after)},
            retry_after_seconds=retry_after,
        )
        self.retry_after = retry_after


class Unavailable(CairnError):
    """The store is throttled or unreachable: safe to retry the same request."""

    status = 503
    code = "temporarily_unavailable"

    def __init__(self, message: str = "Storage is busy; retry shortly.", *, retry_after: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)}, retry_after_seconds=retry_after)
        self.retry_after = retry_after
