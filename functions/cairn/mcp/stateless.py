"""MCP over stateless streamable HTTP: one JSON-RPC message per POST, answered in its response.

No session is kept (no `Mcp-Session-Id`) and no server-to-client stream is
offered, so any Lambda container or `cairn serve` worker answers any
request. The handshake-era protocol versions are spoken (up to 2025-11-25):
a client probing for a newer one gets -32022 with the versions supported
and falls back to `initialize`. Requests are checked with the mcp package's
per-version wire types and results shaped by them.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    EmptyResult,
    ErrorData,
    Implementation,
    InitializeResult,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    ListToolsResult,
    Result,
    ServerCapabilities,
    ToolsCapability,
    methods,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

import cairn
from cairn.errors import named_problems
from cairn.mcp import messages, tools

# What streamable HTTP says to assume when a request carries no MCP-Protocol-Version header.
DEFAULT_VERSION = "2025-03-26"


@dataclass(frozen=True)
class Reply:
    """The HTTP status and the JSON-RPC answer; no answer (202) for notifications and responses."""

    status: int
    message: dict[str, Any] | None


def answer(raw: bytes, protocol_version: str | None, operations: tools.Operations, toolset: tools.Toolset) -> Reply:
    """Answer one POSTed message with `toolset`; `protocol_version` is the request's MCP-Protocol-Version header."""
    message = messages.read(raw)
    if isinstance(message, messages.Refusal):
        return _error(message.status, None, message.code, message.message)
    request_id = message.id if isinstance(message, JSONRPCRequest) else None
    if isinstance(message, JSONRPCRequest) and message.method == "initialize":
        requested = (message.params or {}).get("protocolVersion")
        version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    else:
        version = protocol_version or DEFAULT_VERSION
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            supported = {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": _named(version)}
            text = f"Unsupported MCP protocol version {_named(version)}."
            return _error(400, request_id, UNSUPPORTED_PROTOCOL_VERSION, text, supported)
    if not isinstance(message, JSONRPCRequest):
        # Notifications and responses want no answer, and a stateless server has
        # nothing to cancel or correlate them with.
        return Reply(202, None)
    try:
        request = methods.parse_client_request(message.method, version, message.params)
    except KeyError:
        return _error(200, message.id, METHOD_NOT_FOUND, f"No method {_named(message.method)} at version {version}.")
    except ValidationError as error:
        _, problems = named_problems(error.errors(include_url=False, include_input=False))
        return _error(200, message.id, INVALID_PARAMS, f"Invalid params for {message.method}: {problems}")
    try:
        result = _dispatch(request.method, request.params, version, operations, toolset)
    except tools.UnknownTool as error:
        return _error(200, message.id, INVALID_PARAMS, f"Unknown tool {_named(str(error))}.")
    if result is None:
        return _error(200, message.id, METHOD_NOT_FOUND, f"This server does not offer {_named(message.method)}.")
    shaped = methods.serialize_server_result(
        message.method, version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    response = JSONRPCResponse(jsonrpc="2.0", id=message.id, result=shaped)
    return Reply(200, response.model_dump(by_alias=True, mode="json"))


def _named(text: str) -> str:
    """A client's name for something, as an error repeats it: short, so no answer grows with what was sent."""
    return reprlib.repr(text)


def _dispatch(
    method: str, params: Any, version: str, operations: tools.Operations, toolset: tools.Toolset
) -> Result | None:
    """The result of a method this server offers; None for the protocol's other methods."""
    if method == "initialize":
        return InitializeResult(
            protocol_version=version,
            capabilities=ServerCapabilities(tools=ToolsCapability(list_changed=False)),
            server_info=Implementation(name=tools.SERVER_NAME, version=cairn.__version__),
            instructions=toolset.instructions,
        )
    if method == "ping":
        return EmptyResult()
    if method == "tools/list":
        return ListToolsResult(tools=toolset.definitions())
    if method == "tools/call":
        return toolset.call(operations, params.name, params.arguments)
    return None


def _error(status: int, request_id: Any, code: int, message: str, data: Any = None) -> Reply:
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message, data=data))
    # `id` stays even when null (JSON-RPC requires it); `data` only when there is some.
    body = error.model_dump(by_alias=True, mode="json")
    if data is None:
        del body["error"]["data"]
    return Reply(status, body)
