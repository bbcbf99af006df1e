"""Absolute URLs for the endpoints of an address.

A configured public base URL wins; otherwise the request tells where the
client reached us (API Gateway: domain and stage; local: the Host header).
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

API_PREFIX = "/api/v1"


def base_url(event: BaseProxyEvent, configured: str | None) -> str:
    if configured:
        return configured.rstrip("/")
    headers = {name.lower(): value for name, value in (event.headers or {}).items()}
    context = event.get("requestContext") or {}
    host = context.get("domainName") or headers.get("host") or "localhost"
    scheme = headers.get("x-forwarded-proto", "").lower()
    if scheme not in ("http", "https"):
        # Only a proxy's word for the scheme is taken, and only these two: the URL goes into answers and documents.
        scheme = "https" if context.get("domainName") else "http"
    stage = context.get("stage")
    # API Gateway's default domain includes the stage; a custom domain maps it away.
    prefix = f"/{stage}" if stage and stage != "$default" and ".execute-api." in host else ""
    return f"{scheme}://{host}{prefix}"


def request_origins(event: BaseProxyEvent, region: str) -> list[str]:
    """Every base URL by which this request's service can be reached, as far as the request tells.

    The one the request came by; API Gateway's own hosts for its API (which
    a custom domain hides but does not remove); `cairn serve`'s socket.
    """
    context = event.get("requestContext") or {}
    origins = [base_url(event, None)]
    api_id = context.get("apiId")
    if api_id:
        origins += [f"https://{api_id}.execute-api.{region}.{suffix}" for suffix in ("amazonaws.com", "api.aws")]
    if context.get("serverAddress"):
        origins.append(f"http://{context['serverAddress']}")
    return origins


def address_url(base: str, address_id: str) -> str:
    return f"{base}{API_PREFIX}/addresses/{address_id}"


def endpoints(base: str, address_id: str, inbox_secret: str | None = None) -> dict[str, str]:
    root = address_url(base, address_id)
    urls = {"events_url": f"{root}/events", "state_url": f"{root}/state", "address_url": root}
    if inbox_secret is not None:
        urls = {"inbox_url": f"{base}{API_PREFIX}/inbox/{address_id}/{inbox_secret}", **urls}
    return urls
