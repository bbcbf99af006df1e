"""Errors rebuilt from the server's `{"error": {"code", "message", ...}}` body.

The classes are the server's own (`cairn.errors`): the code picks the class
(`CairnError.for_code`) and the rest of the body becomes its details, so `RevisionConflict` carries
`current_revision` and `RateLimited` its `retry_after`. Each carries the
answer's HTTP `status`; a code this SDK does not know still arrives as a
`CairnError` with that code.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from cairn.errors import CairnError, RetryLater, StateLimitExceeded, Unauthorized


class ConnectionFailed(CairnError):
    """No answer arrived: the connection could not be opened or the answer timed out.

    `status` is 0 because there is no HTTP status. Whether a write that timed
    out was applied is unknown; repeat it with the same idempotency key or
    `if_revision` to find out safely.
    """

    status = 0
    code = "connection_failed"


class UnexpectedAnswer(CairnError):
    """The server answered what no Cairn server sends (an event whose `sequence` is no feed position, say)."""

    status = 0
    code = "unexpected_answer"


def error_from(response: httpx.Response) -> CairnError:
    """The typed error an unsuccessful answer stands for, with the answer's status."""
    error = _rebuilt(response)
    error.status = response.status_code
    return error


def _rebuilt(response: httpx.Response) -> CairnError:
    body = _error_body(response)
    if body is None:
        return _unknown("http_error", f"HTTP {response.status_code} without a Cairn error body.", {})
    code = body.pop("code")
    message = str(body.pop("message", ""))
    kind = CairnError.for_code(code)
    if kind is not None and issubclass(kind, RetryLater):
        return kind(message, retry_after=math.ceil(retry_after(response) or 1))
    if code == Unauthorized.code:
        return Unauthorized(message)
    # Details named like a constructor's own arguments come from no Cairn server: they are left out.
    details = {name: value for name, value in body.items() if name not in _CONSTRUCTOR_ARGUMENTS}
    if code == StateLimitExceeded.code:
        return StateLimitExceeded(message, limit="bytes" if "max_bytes" in body else "keys", **details)
    # Every other class takes the message and the details as they are.
    return kind(message, **details) if kind is not None else _unknown(code, message, details)


_CONSTRUCTOR_ARGUMENTS = frozenset({"self", "message", "limit", "retry_after"})


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait (`Retry-After`, or the body's `retry_after_seconds`)."""
    header = response.headers.get("retry-after")
    try:
        if header is not None and math.isfinite(seconds := float(header)):
            return max(0.0, seconds)
    except ValueError:
        pass  # an HTTP date: rare enough to fall back to the body or to back-off
    body = _error_body(response) or {}
    asked = body.get("retry_after_seconds")
    # Not a bool, and finite: `inf` (a header's, or a body's 1e400) would overflow every sum with it.
    if isinstance(asked, int | float) and not isinstance(asked, bool) and math.isfinite(asked):
        return max(0.0, float(asked))
    return None


def _error_body(response: httpx.Response) -> dict[str, Any] | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return dict(error) if isinstance(error, dict) and isinstance(error.get("code"), str) else None


def _unknown(code: str, message: str, details: dict[str, Any]) -> CairnError:
    failure = CairnError(message, **details)
    failure.code = code
    return failure
