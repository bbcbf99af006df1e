"""What the routes read off a request beyond its path and validated body.

API Gateway and `cairn serve` hand the resolver the same proxy event; these
helpers read it the same way for every route (and for the MCP endpoint), so
a header or body quirk is handled in one place.
"""

from __future__ import annotations

import base64
import ipaddress
from urllib.parse import urlsplit

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from cairn.errors import UnsupportedMediaType


def raw_body(event: BaseProxyEvent) -> bytes:
    """The request body as sent, whether API Gateway passed it as text or base64."""
    body = event.body or ""
    return base64.b64decode(body) if event.is_base64_encoded else body.encode("utf-8", "surrogateescape")


def media_type(event: BaseProxyEvent) -> str:
    """The declared `Content-Type` without its parameters, lower-cased; "" when none."""
    return event.headers.get("content-type", "").partition(";")[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def json_body(event: BaseProxyEvent) -> bytes:
    """The raw body of a route that takes JSON only, declared as such.

    A browser may send a form or text cross-origin without asking first; a
    JSON type it may not, so a route that insists on it is out of a foreign
    page's reach.
    """
    media = media_type(event)
    if not is_json(media):
        raise UnsupportedMediaType(f"Send the body as application/json, not {media[:100] or 'untyped'}.")
    return raw_body(event)


def foreign_origin(event: BaseProxyEvent) -> bool:
    """Whether a browser sent this request from a page of another origin than the one it reached."""
    origin = event.headers.get("origin")
    if not origin:
        return False  # not a browser, or a same-origin GET
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return True  # no origin a browser sends (`http://[`, say): nothing shows it is this one
    return netloc.lower() != event.headers.get("host", "").lower()


def bearer_token(event: BaseProxyEvent) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if any."""
    authorization = event.headers.get("authorization")
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def client_network(event: BaseProxyEvent) -> str:
    """What per-client caps on held reads count by: the caller's IPv4 address, or its IPv6 /64.

    One IPv6 host usually has a whole /64 to itself and may send from any
    address in it, so counting each address apart would count nothing.
    """
    found = client_ip(event)
    if ":" not in found:
        return found
    return str(ipaddress.ip_network(f"{found}/64", strict=False))


def client_ip(event: BaseProxyEvent) -> str:
    """The caller's address as API Gateway saw it; what per-client rate limits count by.

    Anything but an IP address counts as `unknown`: under `cairn serve` behind a
    trusted proxy the address is the proxy's `X-Forwarded-For`, which uvicorn
    takes unchecked, and 2 KB of it made a rate-limit key DynamoDB refused (500).
    """
    identity = (event.get("requestContext") or {}).get("identity") or {}
    try:
        return str(ipaddress.ip_address(identity.get("sourceIp") or ""))
    except ValueError:
        return "unknown"
