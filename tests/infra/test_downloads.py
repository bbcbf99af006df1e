"""Attachment downloads: streamed from the streaming function, without taking any other path from the API function."""

from __future__ import annotations

import os
from pathlib import PurePosixPath
from typing import Any

import pytest

from infra.code import FUNCTIONS_DIR
from tests.infra.synthesis import Synthesis
from tests.infra.test_functions import API_HANDLER, STREAMING_HANDLER, function_by_handler

ATTACHMENT = "/api/v1/addresses/addr_1/events/evt_1/attachments/att_1"


def route(synthesis: Synthesis, http_method: str, request_path: str) -> dict[str, Any] | None:
    """The method API Gateway picks: a static part before a `{name}`, a `{proxy+}` last; GET before ANY."""
    methods = synthesis.gateway_methods()
    resources = {path for path, _ in methods}
    current = ""
    segments = [segment for segment in request_path.split("/") if segment]
    for segment in segments:
        children = sorted(path for path in resources if str(PurePosixPath(path).parent) == (current or "/"))
        if f"{current}/{segment}" in children:
            current = f"{current}/{segment}"
            continue
        variables = [path for path in children if path.endswith("}") and not path.endswith("+}")]
        greedy = [path for path in children if path.endswith("+}")]
        if variables:
            current = variables[0]
        elif greedy:
            current = greedy[0]
            break
        else:
            return None
    current = current or "/"
    return methods.get((current, http_method)) or methods.get((current, "ANY"))


def invoked_function(synthesis: Synthesis, method: dict[str, Any]) -> str:
    """The logical id of the function the integration invokes, directly or through an alias of it."""
    aliases = synthesis.resources("AWS::Lambda::Alias")
    [target] = [
        part["Fn::GetAtt"][0] if "Fn::GetAtt" in part else aliases[part["Ref"]]["Properties"]["FunctionName"]["Ref"]
        for part in method["Integration"]["Uri"]["Fn::Join"][1]
        if "Fn::GetAtt" in part or ("Ref" in part and part["Ref"] in aliases)
    ]
    return target


def test_an_attachment_get_streams_from_the_download_function(full: Synthesis) -> None:
    downloads, _ = function_by_handler(full, STREAMING_HANDLER)
    method = route(full, "GET", ATTACHMENT)
    assert method is not None
    assert invoked_function(full, method) == downloads
    integration = method["Integration"]
    assert (integration["Type"], integration["ResponseTransferMode"]) == ("AWS_PROXY", "STREAM")
    uri = "".join(part for part in integration["Uri"]["Fn::Join"][1] if isinstance(part, str))
    # Streaming invokes through InvokeWithResponseStream, not Invoke.
    assert "/2021-11-15/functions/" in uri and uri.endswith("/response-streaming-invocations")
    assert method["AuthorizationType"] == "NONE"


@pytest.mark.parametrize(
    "http_method, path",
    [
        ("POST", "/api/v1/addresses"),
        ("GET", "/api/v1/addresses/addr_1"),
        ("DELETE", "/api/v1/addresses/addr_1"),
        ("POST", "/api/v1/addresses/addr_1/events"),
        ("GET", "/api/v1/addresses/addr_1/events/evt_1"),
        ("POST", "/api/v1/addresses/addr_1/events/ack"),
        ("PUT", "/api/v1/addresses/addr_1/state/plan"),
        ("POST", "/api/v1/addresses/addr_1/email/replay"),
        ("GET", "/api/v1/addresses/addr_1/events/evt_1/attachments"),
        ("HEAD", ATTACHMENT),
        ("POST", ATTACHMENT),
        ("GET", f"{ATTACHMENT}/more"),
        ("POST", "/api/v1/inbox/addr_1/secret"),
        ("GET", "/openapi.json"),
        ("GET", "/"),
    ],
)
def test_every_other_path_still_reaches_the_open_api_function(full: Synthesis, http_method: str, path: str) -> None:
    api_function, _ = function_by_handler(full, API_HANDLER)
    method = route(full, http_method, path)
    assert method is not None, f"API Gateway would answer {http_method} {path} with 'Missing Authentication Token'"
    assert invoked_function(full, method) == api_function
    assert method["AuthorizationType"] == "NONE"
    assert method["Integration"].get("ResponseTransferMode", "BUFFERED") == "BUFFERED"


def test_runtime_routes_keep_iam_beside_the_download_route(full: Synthesis) -> None:
    method = route(full, "POST", "/api/v1/runtime/start_root_run")
    assert method is not None and method["AuthorizationType"] == "AWS_IAM"


def test_api_gateway_may_invoke_the_streaming_function_only_for_the_streamed_routes(full: Synthesis) -> None:
    streaming, _ = function_by_handler(full, STREAMING_HANDLER)
    sources = {
        permission["Properties"]["SourceArn"]["Fn::Join"][1][-1]
        for permission in full.resources("AWS::Lambda::Permission").values()
        if permission["Properties"]["FunctionName"] == {"Fn::GetAtt": [streaming, "Arn"]}
    }
    assert sources == {
        "/GET/api/v1/addresses/*/events",
        "/GET/api/v1/addresses/*/events/*/attachments/*",
        "/POST/mcp",
    }


def test_the_streaming_function_runs_the_streaming_bootstrap_from_its_code(full: Synthesis) -> None:
    _, properties = function_by_handler(full, STREAMING_HANDLER)
    wrapper = properties["Environment"]["Variables"]["AWS_LAMBDA_EXEC_WRAPPER"]
    # Lambda unpacks the code asset, functions/, at /var/task.
    in_asset = FUNCTIONS_DIR / PurePosixPath(wrapper).relative_to("/var/task")
    assert in_asset.is_file() and os.access(in_asset, os.X_OK)
    assert "cairn.entrypoints.streaming" in in_asset.read_text()
    # Room to read and parse a 40 MB message and send 10 MB after API Gateway's 29 s.
    assert properties["Timeout"] >= 30 and properties["MemorySize"] >= 1024


def test_without_email_there_is_no_download_route(default: Synthesis) -> None:
    assert not any("attachments" in path for path, _ in default.gateway_methods())
