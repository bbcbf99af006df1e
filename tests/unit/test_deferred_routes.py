"""Every route a container registers on first use is reached by a request for its own path.

A Lambda container that never served `/openapi.json` (which registers every
group) registers a deferred group only when a request's path names it; a
route whose path no group's pattern matched would answer 404 there, and
nowhere else, since every other test server may have registered it already.
"""

from __future__ import annotations

import re

import pytest

from cairn.api.app import create_app
from cairn.api.resolver import ConcurrentRestResolver
from cairn.services import Services
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services


def routes(app: ConcurrentRestResolver) -> set[tuple[str, str]]:
    return {(route.method, route.path) for route in app._static_routes + app._dynamic_routes}


def concrete(path: str) -> str:
    """The path a client would send: each `<parameter>` filled in."""
    return re.sub(r"<[^>]+>", "x1", path)


@pytest.fixture
def services(moto_env: None, clock: FakeClock) -> Services:
    return make_services(clock=clock)


def test_a_new_container_starts_with_the_inbox_poll_and_state_routes_only(services: Services) -> None:
    paths = {path for _, path in routes(create_app(services))}
    assert "/api/v1/inbox/<address_id>/<secret>" in paths
    assert "/api/v1/addresses/<address_id>/events" in paths
    assert not any(path.startswith(("/api/v1/runtime", "/mcp", "/openapi.json")) for path in paths)
    assert not any("subscriptions" in path or "/email/" in path for path in paths)


def test_each_deferred_route_registers_when_its_own_path_is_asked_for(services: Services) -> None:
    eager = routes(create_app(services))
    everything = create_app(services)
    everything._register_deferred(None)  # every group, as the OpenAPI document does
    deferred = routes(everything) - eager
    assert len(deferred) > 20

    for method, path in sorted(deferred):
        fresh = create_app(services)
        fresh._register_deferred(concrete(path))
        assert (method, path) in routes(fresh), f"{method} {path} is not registered by a request for it"


def test_the_inbox_page_asked_for_with_a_trailing_slash_first_is_sent_to_the_page(services: Services) -> None:
    """`/inbox/` is the page's address with a slash too many: a new container answered it with a 404
    until someone had asked for `/inbox`, which registers the page's routes."""
    reply = LambdaClient(services).request("GET", "/inbox/")
    assert (reply.status, reply.headers.get("Location")) == (308, "../inbox")
