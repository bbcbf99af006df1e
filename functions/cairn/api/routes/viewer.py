"""The inbox page for people: `/inbox`, its script modules and style sheet under `/inbox/`.

Static files served by the resolver: no build step, no framework, nothing
from other origins. The page calls the JSON API with the read token in an
Authorization header, so the Content-Security-Policy allows scripts, styles
and requests to this origin only, and nothing may frame the page.
"""

from collections.abc import Callable
from functools import cache
from importlib import resources

from aws_lambda_powertools.event_handler import Response

from cairn.api.resolver import ConcurrentRestResolver
from cairn.services import Services

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
MODULES = ("main", "api", "dom", "feed", "summary", "events", "detail", "mail", "thread", "reply", "contacts", "state")
FILES = {
    "/inbox": ("inbox.html", "text/html; charset=utf-8"),
    "/inbox/inbox.css": ("inbox.css", "text/css; charset=utf-8"),
    "/inbox/icon.svg": ("icon.svg", "image/svg+xml"),
    **{f"/inbox/{name}.js": (f"{name}.js", "text/javascript; charset=utf-8") for name in MODULES},
}


@cache
def _read(name: str) -> str:
    return resources.files("cairn.api").joinpath("static", "viewer", name).read_text()


def register(app: ConcurrentRestResolver, services: Services) -> None:
    del services  # the page is the same for every deployment
    for path, (name, content_type) in FILES.items():
        app.get(path, include_in_schema=False)(_server(app, name, content_type))


def _server(app: ConcurrentRestResolver, name: str, content_type: str) -> Callable[[], Response[str]]:
    # A closure, not default arguments: the resolver would read those as query parameters.
    def serve() -> Response[str]:
        if app.current_event.path.endswith("/"):
            # The resolver routes `/inbox/` here too, where the page's relative URLs (`inbox/main.js`, kept
            # relative for a stage's prefix) would point one folder too deep: the page stayed blank.
            return Response(status_code=308, content_type=content_type, body="", headers={"Location": "../inbox"})
        return Response(
            status_code=200,
            content_type=content_type,
            body=_read(name),
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-cache",
            },
        )

    return serve
