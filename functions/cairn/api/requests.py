"""What the routes read off a request beyond its path and validated body.

API Gateway and `cairn serve` hand the resolver the same proxy event; these
helpers read it the same way for every route (and for the MCP endpoint), so
a header or body quirk is handled in one place.
"""

from __future__ import annotations

import base64

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent


def raw_body(event: BaseProxyEvent) -> bytes:
    """The request body as sent, whether API Gateway passed it as text or base64."""
    body = event.body or ""
    return base64.b64decode(body) if event.is_base64_encoded else body.encode("utf-8", "surrogateescape")


def bearer_token(event: BaseProxyEvent) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if any."""
    authorization = event.headers.get("authorization")
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def client_ip(event: BaseProxyEvent) -> str:
    """The caller's address as API Gateway saw it; what per-client rate limits count by."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    return identity.get("sourceIp") or "unknown"
