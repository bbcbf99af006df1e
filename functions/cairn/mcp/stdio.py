"""`cairn mcp`: the address tools over stdio, for agents that launch their MCP servers.

The tools call a Cairn server's HTTP API through the Python SDK, so they
answer exactly as `/mcp` on that server would. The protocol itself (version
negotiation, framing, both eras) is the mcp package's own server.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, Mapping
from typing import Any, Protocol

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    ListToolsResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError

import cairn
from cairn.client import Address, HttpClient
from cairn.errors import NotFound
from cairn.mcp import tools


class ClientOperations:
    """The tools' operations over HTTP, on the server at `base_url`."""

    def __init__(self, base_url: str, http: HttpClient) -> None:
        self._base_url = base_url
        self._http = http

    def create_return_address(self, arguments: tools.CreateReturnAddress) -> Mapping[str, Any]:
        address = Address.provision(
            self._base_url,
            task_id=arguments.task_id,
            name=arguments.name,
            expires_in=arguments.expires_in_seconds,
            http=self._http,
        )
        return address.to_dict()

    def poll_events(self, arguments: tools.PollEvents) -> Mapping[str, Any]:
        events = self._address(arguments).events
        return events.poll(after=arguments.after, wait=arguments.wait, limit=arguments.limit)

    def acknowledge_event(self, arguments: tools.AcknowledgeEvent) -> Mapping[str, Any]:
        return self._address(arguments).events.ack(arguments.event_id)

    def get_state(self, arguments: tools.StateKeyArguments) -> Mapping[str, Any]:
        return self._address(arguments).state.get(arguments.key)

    def set_state(self, arguments: tools.SetState) -> Mapping[str, Any]:
        state = self._address(arguments).state
        return state.set(arguments.key, arguments.value, if_revision=arguments.if_revision)

    def delete_state(self, arguments: tools.DeleteState) -> Mapping[str, Any]:
        return self._address(arguments).state.delete(arguments.key, if_revision=arguments.if_revision)

    def list_state(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        return self._address(arguments).state.keys()

    def list_contacts(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        return self._address(arguments).email.contacts()

    def add_contact(self, arguments: tools.ContactArguments) -> Mapping[str, Any]:
        return self._address(arguments).email.add_contact(arguments.email)

    def verify_contact(self, arguments: tools.VerifyContact) -> Mapping[str, Any]:
        return self._address(arguments).email.verify_contact(arguments.email, arguments.code)

    def send_email(self, arguments: tools.SendEmail) -> Mapping[str, Any]:
        return self._address(arguments).email.send(
            arguments.to,
            arguments.text,
            subject=arguments.subject,
            reply_to_event_id=arguments.reply_to_event_id,
            idempotency_key=arguments.idempotency_key,
        )

    def create_subscription(self, arguments: tools.CreateSubscription) -> Mapping[str, Any]:
        subscriptions = self._address(arguments).subscriptions
        return subscriptions.create(arguments.target, types=arguments.types, description=arguments.description)

    def list_subscriptions(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        return {"subscriptions": self._address(arguments).subscriptions.list()}

    def delete_subscription(self, arguments: tools.SubscriptionArguments) -> Mapping[str, Any]:
        self._address(arguments).subscriptions.delete(arguments.subscription_id)
        return {"subscription_id": arguments.subscription_id, "deleted": True}

    def write_file(self, arguments: tools.WriteFile) -> Mapping[str, Any]:
        return self._address(arguments).files.write(arguments.key, arguments.content())

    def read_file(self, arguments: tools.FileKeyArguments) -> Mapping[str, Any]:
        data = self._address(arguments).files.read(arguments.key)
        if data is None:
            raise NotFound("No file under this key.", key=arguments.key)
        return tools.file_answer(arguments.key, data)

    def list_files(self, arguments: tools.ListFiles) -> Mapping[str, Any]:
        files = self._address(arguments).files
        return files.list(arguments.prefix, after=arguments.after, limit=arguments.limit)

    def delete_file(self, arguments: tools.FileKeyArguments) -> Mapping[str, Any]:
        return {"key": arguments.key, "deleted": self._address(arguments).files.delete(arguments.key)}

    def _address(self, arguments: tools.AddressArguments) -> Address:
        return Address.connect(self._base_url, arguments.address_id, arguments.read_token, http=self._http)


def build_server(operations: tools.Operations) -> Server:
    """The mcp package's server with Cairn's tools."""

    async def list_tools(_context: Any, _params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=tools.CAIRN.definitions())

    async def call_tool(_context: Any, params: CallToolRequestParams) -> CallToolResult:
        # The SDK blocks (a long-poll waits up to 25 s): keep the event loop free for other messages.
        run = functools.partial(tools.CAIRN.call, operations, params.name, params.arguments)
        try:
            return await anyio.to_thread.run_sync(run)
        except tools.UnknownTool as error:
            raise MCPError(INVALID_PARAMS, f"Unknown tool {error}.") from error

    return Server(
        tools.SERVER_NAME,
        version=cairn.__version__,
        instructions=tools.CAIRN.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(base_url: str, http: HttpClient) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    server = build_server(ClientOperations(base_url, http))

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            readable_in, readable = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            async with anyio.create_task_group() as group:
                group.start_soon(_screen, read_stream, readable_in, write_stream)
                await server.run(readable, write_stream, server.create_initialization_options())

    anyio.run(main)


class _Replies(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


async def _screen(
    lines: AsyncIterable[SessionMessage | Exception],
    readable: MemoryObjectSendStream[SessionMessage | Exception],
    replies: _Replies,
) -> None:
    """Pass each message on, and answer a line that is none with a JSON-RPC error (`id` null).

    The mcp package hands the server an exception for such a line, which it
    only logs: a client that sent a batch waited for an answer forever.
    """
    async with readable:
        async for item in lines:
            if isinstance(item, Exception):
                if not _blank(item):  # a blank line between messages is no message, and asks no answer
                    await replies.send(SessionMessage(_unreadable(item)))
            else:
                await readable.send(item)


def _blank(error: Exception) -> bool:
    if not isinstance(error, ValidationError):
        return False
    return all(isinstance(problem.get("input"), str) and not problem["input"].strip() for problem in error.errors())


def _unreadable(error: Exception) -> JSONRPCError:
    not_json = isinstance(error, ValidationError) and any(
        problem["type"] == "json_invalid" for problem in error.errors()
    )
    if not_json:
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Not JSON."))
    text = "Not a JSON-RPC 2.0 message (one message a line; batches are not supported)."
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=text))
