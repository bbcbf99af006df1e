"""Waiting readers are isolated: every feed read and every call of the MCP endpoint whose poll waits runs in the
streaming function, with concurrency of its own."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.api.routes import mcp
from cairn.mcp import tools
from tests.infra.synthesis import Synthesis
from tests.infra.test_downloads import invoked_function, route
from tests.infra.test_functions import (
    API_HANDLER,
    STREAMING_HANDLER,
    as_list,
    function_by_handler,
    policy_statements,
    role_of,
)

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


def waits(endpoint: mcp.Endpoint) -> bool:
    """Whether the endpoint's `poll_events` takes `wait`, and so may hold the function that runs it."""
    return any("wait" in tool.arguments.model_fields for tool in endpoint.toolset(tools).tools)


def test_the_mcp_endpoint_whose_poll_waits_is_the_one_that_streams() -> None:
    """`/mcp` offers the waiting poll; `/api/mcp`, AgentAddress's, answers at once (no `wait` input)."""
    assert {endpoint.path for endpoint in mcp.ENDPOINTS if waits(endpoint)} == {"/mcp"}


@pytest.mark.parametrize("endpoint", mcp.ENDPOINTS, ids=lambda endpoint: endpoint.path)
@pytest.mark.parametrize("shape", ["default", "full"])
def test_every_mcp_call_that_may_wait_streams_from_the_streaming_function(
    shape: str, endpoint: mcp.Endpoint, request: pytest.FixtureRequest
) -> None:
    """A JSON-RPC message names its tool in the body, which API Gateway cannot route on: the whole endpoint goes."""
    synthesis: Synthesis = request.getfixturevalue(shape)
    api_function, _ = function_by_handler(synthesis, API_HANDLER)
    method = route(synthesis, "POST", endpoint.path)
    assert method is not None
    integration = method["Integration"]
    if not waits(endpoint):
        assert invoked_function(synthesis, method) == api_function
        assert integration.get("ResponseTransferMode", "BUFFERED") == "BUFFERED"
        return
    assert invoked_function(synthesis, method) == function_by_handler(synthesis, STREAMING_HANDLER)[0]
    # The streaming function's loop answers in the streaming format only: STREAM mode reads it.
    assert (integration["Type"], integration["ResponseTransferMode"]) == ("AWS_PROXY", "STREAM")
    assert method["AuthorizationType"] == "NONE"
    # The rest of the path still reaches the application, which answers GET with 405 and a wrong path with 404.
    for http_method, path in (("GET", endpoint.path), ("POST", f"{endpoint.path}/more")):
        other = route(synthesis, http_method, path)
        assert other is not None and invoked_function(synthesis, other) == api_function, (http_method, path)


def grants(synthesis: Synthesis, handler: str) -> set[tuple[str, str, str]]:
    """Each (action, resource, condition) the function's role allows, but for its own logs and traces."""
    _, properties = function_by_handler(synthesis, handler)
    return {
        (action, repr(resource), repr(statement.get("Condition")))
        for statement in policy_statements(synthesis, role_of(properties))
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
        if not action.startswith(("logs:", "xray:"))
        for resource in as_list(statement["Resource"])
    }


def actions(found: set[tuple[str, Any, Any]]) -> set[str]:
    return {action for action, _, _ in found}


@pytest.mark.parametrize("shape", ["default", "full"])
def test_the_streaming_role_may_do_what_the_mcp_tools_do_and_nothing_the_api_role_may_not(
    shape: str, request: pytest.FixtureRequest
) -> None:
    synthesis: Synthesis = request.getfixturevalue(shape)
    streaming = grants(synthesis, STREAMING_HANDLER)
    # provisioning, state writes and deletes, subscriptions (`tests/integration/test_function_grants.py` runs each tool)
    assert {"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"} <= actions(streaming)
    # The same actions on the same resources under the same conditions, or narrower: never more.
    assert streaming <= grants(synthesis, API_HANDLER)
    # Deleting an address and trimming a feed (batch writes) and reading the server secret: the API's alone.
    assert not {"dynamodb:BatchWriteItem", "secretsmanager:GetSecretValue"} & actions(streaming)
    if shape == "full":
        assert "ses:SendEmail" in actions(streaming), "send_email and add_contact mail"


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
        ("POST", "/api/mcp"),
        ("GET", "/mcp"),
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
