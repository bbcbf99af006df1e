"""`cairn mcp`: the address tools over stdio, for agents that launch their MCP servers.

The tools call a Cairn server's HTTP API through the Python SDK, so they
answer exactly as `/mcp` on that server would. The protocol itself (version
negotiation, framing, both eras) is the mcp package's own server.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, TextIO

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    ListToolsResult,
    PaginatedRequestParams,
)

import cairn
from cairn.client import Address, HttpClient
from cairn.errors import NotFound
from cairn.mcp import messages, tools


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
        refusals_in, refusals = anyio.create_memory_object_stream[JSONRPCError](0)
        # Undecodable bytes replaced, as the mcp package reads stdin: one would otherwise end the reading.
        stdin = _ScreenedLines(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"), refusals_in)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream), anyio.create_task_group() as group:
            group.start_soon(_answer, refusals, write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()

    anyio.run(main)


class _ScreenedLines(anyio.AsyncFile[str]):
    """stdin's lines as `stdio_server` reads them, less each line that holds no message: that line is
    answered with its error instead (`refusals`).

    The mcp package would only log such a line, or read a request whose id is
    no request id as a notification, which is never answered: either way the
    client waited for an answer forever.
    """

    def __init__(self, lines: TextIO, refusals: MemoryObjectSendStream[JSONRPCError]) -> None:
        super().__init__(lines)
        self._refusals = refusals

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._refusals:
            async for line in super().__aiter__():
                if not line.strip():
                    continue  # a blank line between messages is no message, and asks no answer
                read = messages.read(line.encode())
                if isinstance(read, messages.Refusal):
                    error = ErrorData(code=read.code, message=read.message)
                    await self._refusals.send(JSONRPCError(jsonrpc="2.0", id=None, error=error))
                else:
                    yield line


async def _answer(refusals: AsyncIterable[JSONRPCError], replies: MemoryObjectSendStream[SessionMessage]) -> None:
    async for refusal in refusals:
        await replies.send(SessionMessage(refusal))
