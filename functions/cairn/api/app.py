"""Build the resolver: routes, error mapping and CORS for one set of services."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

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
    outbound,
    state,
    subscriptions,
    viewer,
)
from cairn.services import Services

CORS = CORSConfig(
    allow_origin="*",
    # Last-Event-ID: a page reading the feed's event stream with fetch resumes with it.
    allow_headers=["Idempotency-Key", "If-Match", "Last-Event-ID"],
    expose_headers=["Retry-After", "Idempotent-Replayed"],
    max_age=600,
)


# Routes for trusted workers and tools, never for a web page of another origin: they carry no
# CORS headers and their preflights are refused. (Address routes keep CORS: their credentials
# travel in headers, so a page can only use a token it already holds.)
SAME_ORIGIN_PREFIXES = ("/api/v1/runtime/", "/api/v1/memory/", "/mcp", "/api/mcp")

# Route groups whose modules (and the runtime and transcript code under them) load with the first
# request under their prefix, so an inbox post or a poll never pays for them: module, prefixes.
DEFERRED_GROUPS = (("runtime", ("/api/v1/runtime/",)), ("memory", ("/api/v1/memory/",)))


def create_app(services: Services) -> ConcurrentRestResolver:
    """The one resolver that Lambda and `cairn serve` both run."""
    app = ConcurrentRestResolver(enable_validation=True, cors=CORS, same_origin_prefixes=SAME_ORIGIN_PREFIXES)
    register_error_handlers(app)
    eager = (addresses, inbox, inbox_settings, events, state, email, outbound, subscriptions, mcp, discovery, viewer)
    for group in eager:
        group.register(app, services)
    for name, prefixes in DEFERRED_GROUPS:
        app.defer(prefixes, _registration(app, services, name))
    return app


def _registration(app: ConcurrentRestResolver, services: Services, name: str) -> Callable[[], None]:
    """Registers the routes of `cairn.api.routes.<name>` on `app`, importing the module then."""

    def register() -> None:
        import_module(f"cairn.api.routes.{name}").register(app, services)

    return register
