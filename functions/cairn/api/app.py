"""Build the resolver: routes, error mapping and CORS for one set of services."""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import import_module

from aws_lambda_powertools.event_handler import CORSConfig

from cairn.api.errors import register_error_handlers
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes import addresses, events, inbox, inbox_settings, state
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

# Route groups whose modules (and the runtime, transcript, MCP, mail, wake-up, checkpoint, store, session, file and
# discovery code under them) load with the first request for one of their paths, so an inbox post or a poll never
# pays for them: module, the paths its routes answer.
ADDRESS = r"^/api/v1/addresses/[^/]+"
DEFERRED_GROUPS = (
    ("runtime", r"^/api/v1/runtime/"),
    ("memory", r"^/api/v1/memory/"),
    ("mcp", r"^/(api/)?mcp(/|$)"),
    ("email", ADDRESS + r"/(events/[^/]+/attachments/|email/replay$)"),
    ("outbound", ADDRESS + r"/email/(contacts|send)(/|$)"),
    ("subscriptions", ADDRESS + r"/subscriptions(/|$)"),
    ("checkpoints", ADDRESS + r"/checkpoints(/|$)"),
    ("agent_sessions", ADDRESS + r"/sessions/"),
    ("strands", ADDRESS + r"/strands/"),
    ("store", ADDRESS + r"/store(/|$)"),
    ("files", ADDRESS + r"/files(/|$)"),
    ("discovery", r"^/(skill\.md|llms\.txt|llms-full\.txt|openapi\.json|\.well-known/|healthz$)"),
    ("viewer", r"^/inbox(/|/[a-z]+\.(js|css|svg))?$"),
)


def create_app(services: Services) -> ConcurrentRestResolver:
    """The one resolver that Lambda and `cairn serve` both run."""
    app = ConcurrentRestResolver(enable_validation=True, cors=CORS, same_origin_prefixes=SAME_ORIGIN_PREFIXES)
    register_error_handlers(app)
    for group in (addresses, inbox, inbox_settings, events, state):
        group.register(app, services)
    for name, paths in DEFERRED_GROUPS:
        app.defer(re.compile(paths), _registration(app, services, name))
    return app


def _registration(app: ConcurrentRestResolver, services: Services, name: str) -> Callable[[], None]:
    """Registers the routes of `cairn.api.routes.<name>` on `app`, importing the module then."""

    def register() -> None:
        import_module(f"cairn.api.routes.{name}").register(app, services)

    return register
