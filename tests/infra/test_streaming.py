"""Waiting readers are isolated: every feed read runs in the streaming function, with concurrency of its own."""

from __future__ import annotations

import pytest

from tests.infra.synthesis import Synthesis
from tests.infra.test_downloads import invoked_function, route
from tests.infra.test_functions import API_HANDLER, STREAMING_HANDLER, function_by_handler

FEED = "/api/v1/addresses/addr_1/events"


@pytest.mark.parametrize("shape", ["default", "full"])
def test_every_feed_read_streams_from_the_streaming_function(shape: str, request: pytest.FixtureRequest) -> None:
    """Polls, long-polls and event streams share one URL: REST APIs cannot route on `wait` or `Accept`."""
    synthesis: Synthesis = request.getfixturevalue(shape)
    streaming, _ = function_by_handler(synthesis, STREAMING_HANDLER)
    method = route(synthesis, "GET", FEED)
    assert method is not None
    assert invoked_function(synthesis, method) == streaming
    integration = method["Integration"]
    assert (integration["Type"], integration["ResponseTransferMode"]) == ("AWS_PROXY", "STREAM")
    # STREAM mode lets a stream run to Lambda's 15 minutes instead of 29 s.
    assert integration["TimeoutInMillis"] == 900_000
    assert method["AuthorizationType"] == "NONE"


@pytest.mark.parametrize(
    "http_method, path",
    [
        ("POST", "/api/v1/inbox/addr_1/secret"),
        ("PUT", "/api/v1/addresses/addr_1/state/plan"),
        ("POST", "/api/v1/addresses/addr_1/state"),
        ("POST", "/api/v1/addresses/addr_1/events/evt_1/ack"),
        ("POST", "/api/v1/addresses"),
        ("GET", "/api/v1/addresses/addr_1"),
        ("DELETE", "/api/v1/addresses/addr_1"),
        ("POST", FEED),
        ("GET", f"{FEED}/evt_1"),
        ("POST", "/mcp"),
    ],
)
def test_writes_and_everything_else_stay_on_the_api_function(default: Synthesis, http_method: str, path: str) -> None:
    api_function, _ = function_by_handler(default, API_HANDLER)
    method = route(default, http_method, path)
    assert method is not None, f"API Gateway would answer {http_method} {path} with 'Missing Authentication Token'"
    assert invoked_function(default, method) == api_function
    assert method["Integration"].get("ResponseTransferMode", "BUFFERED") == "BUFFERED"


def test_the_streaming_function_has_its_own_reserved_concurrency(default: Synthesis, full: Synthesis) -> None:
    """Reserved, so waiting readers are capped there and never take the writers' concurrency."""
    assert function_by_handler(default, STREAMING_HANDLER)[1]["ReservedConcurrentExecutions"] == 50
    assert function_by_handler(full, STREAMING_HANDLER)[1]["ReservedConcurrentExecutions"] == 20
    assert function_by_handler(full, API_HANDLER)[1]["ReservedConcurrentExecutions"] == 50


def test_the_streaming_function_outlives_the_longest_stream(full: Synthesis) -> None:
    _, properties = function_by_handler(full, STREAMING_HANDLER)
    variables = properties["Environment"]["Variables"]
    assert properties["Timeout"] == 900
    assert int(variables["CAIRN_MAX_STREAM_SECONDS"]) < properties["Timeout"]
