"""Build the resolver: routes, error mapping and CORS for one set of services."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import CORSConfig

from cairn.api.errors import register_error_handlers
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes import (
    addresses,
    discovery,
    email,
    events,
    inbox,
    inbox_settings,
    mcp,
    memory,
    outbound,
    runtime,
    state,
    subscriptions,
    viewer,
)
from cairn.services import Services

CORS = CORSConfig(
    allow_origin="*",
    # Last-Event-ID: a page reading the feed's event stream with fetch resumes with it.
    allow_headers=["Idempotency-Key", "If-Match", "Last-Event-ID"],
    expose_headers=["Retry-After"],
    max_age=600,
)


# Routes for trusted workers and tools, never for a web page of another origin: they carry no
# CORS headers and their preflights are refused. (Address routes keep CORS: their credentials
# travel in headers, so a page can only use a token it already holds.)
SAME_ORIGIN_PREFIXES = ("/api/v1/runtime/", "/api/v1/memory/", "/mcp", "/api/mcp")


def create_app(services: Services) -> ConcurrentRestResolver:
    """The one resolver that Lambda and `cairn serve` both run."""
    app = ConcurrentRestResolver(enable_validation=True, cors=CORS, same_origin_prefixes=SAME_ORIGIN_PREFIXES)
    register_error_handlers(app)
    for group in (
        addresses, inbox, inbox_settings, events, state, email, outbound, subscriptions, runtime, memory, mcp,
        discovery, viewer,
    ):
        group.register(app, services)
    return app
