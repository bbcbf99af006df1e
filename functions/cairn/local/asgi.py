"""Serve the Lambda resolver over HTTP: each request becomes an API Gateway
REST proxy event, is resolved on a worker thread, and its answer is sent back.

Long-polls block their worker thread while they wait, so the thread pool is
sized for hundreds of concurrent polls rather than for CPU count. An answer
whose body is an iterator (a stream of server-sent events) is sent chunk by
chunk as a worker thread draws each one, never buffered.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

Resolve = Callable[[dict[str, Any], Any], dict[str, Any]]
# ASGI's channels: `receive` gives the client's next message, `send` hands the server one of ours.
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Lambda refuses request payloads above 6 MB; refuse them here the same way.
MAX_REQUEST_BYTES = 6 * 1024 * 1024


class LocalContext:
    """The parts of a Lambda context the routes and Powertools read."""

    function_name = "cairn-local"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:cairn-local"
    memory_limit_in_mb = 1024
    log_group_name = "local"
    log_stream_name = "local"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    # Answers whose body is an iterator of chunks are sent as they are made (`_send_stream`).
    streams_responses = True

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class ResolverBridge:
    """ASGI application around a Lambda-style `resolve(event, context)`.

    `host_names`: the names (besides IP literals and `localhost`) a request's
    `Host` may carry. A page whose own name an attacker points at 127.0.0.1
    (DNS rebinding) is same-origin to the browser; only its `Host` tells.
    """

    def __init__(
        self,
        resolve: Resolve,
        *,
        host_names: frozenset[str] = frozenset(),
        trust_forwarded: bool = False,
        max_concurrency: int = 1024,
    ) -> None:
        """`trust_forwarded`: a proxy in front sets `X-Forwarded-*`; otherwise they are dropped unread."""
        self._resolve = resolve
        self._trust_forwarded = trust_forwarded
        self._host_names = frozenset(name.lower() for name in host_names) | {"localhost"}
        self._limiter = anyio.CapacityLimiter(max_concurrency)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if not self._known_host(scope):
            await _send(send, _error(421, "host_not_allowed", "This server does not answer to that Host name."))
            return
        try:
            body = await read_body(receive)
        except ClientGone:
            return  # a body cut short is not a request: nothing is resolved, so nothing is committed
        if body is None:
            await _send(send, _too_large())
            return
        event = rest_event(scope, body, trust_forwarded=self._trust_forwarded)
        response = await anyio.to_thread.run_sync(self._resolve, event, LocalContext(), limiter=self._limiter)
        if isinstance(response.get("body"), str | None):
            await _send(send, response)
        else:
            await self._send_stream(receive, send, response)

    async def _send_stream(self, receive: Receive, send: Send, response: dict[str, Any]) -> None:
        """Send each chunk of an iterator body as a worker thread draws it, until it ends or the client leaves.

        Drawing a chunk may block (a stream waits for the next event or
        heartbeat), so it happens off the event loop. A client that hangs up
        is noticed at once: the chunk being drawn (at most one heartbeat
        away) is the last, and the iterator is closed on a worker thread.
        """
        chunks = iter(response["body"])
        start = _start(response)
        size = getattr(response["body"], "size", None)
        if isinstance(size, int):
            # A body of known length (an attachment) is framed by it, as a text body is, not chunked.
            start["headers"].append((b"content-length", str(size).encode()))
        try:
            await send(start)
            async with anyio.create_task_group() as group:
                group.start_soon(_cancel_on_disconnect, receive, group)
                try:
                    while (chunk := await self._draw(chunks)) is not None:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b""})
                finally:
                    group.cancel_scope.cancel()
        except OSError:
            pass  # the client went away, before the answer started or mid-send
        finally:
            # Runs the iterator's own clean-up (it holds a stream slot and may hold a feed subscription), also
            # when the server itself is cancelling this request; not on the event loop.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_close, chunks)

    async def _draw(self, chunks: Iterator[bytes]) -> bytes | None:
        """The next chunk, or None at the end, drawn on a worker thread: drawing may wait for the next event."""
        return await anyio.to_thread.run_sync(next, chunks, None, limiter=self._limiter)

    def _known_host(self, scope: dict[str, Any]) -> bool:
        """The `Host` is a name or IP literal of this server's, and nothing but a name and a port.

        The header goes into the URLs answers hand out as it came, so it must be
        exactly what it is checked as: `evil.example\\@127.0.0.1`, `localhost/x`
        or `a@localhost` would pass a check of their host part and hand out
        URLs that lead elsewhere.
        """
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        if not (found := _HOST_HEADER.fullmatch(host)):
            return False
        name = found["name"].lower()
        return name in self._host_names or _is_ip_literal(name.strip("[]"))


# RFC 9110's `Host`: a registered name or an IP literal (IPv6 in brackets), then an optional port.
_HOST_HEADER = re.compile(r"(?P<name>[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def rest_event(scope: dict[str, Any], body: bytes, *, trust_forwarded: bool = False) -> dict[str, Any]:
    """The API Gateway REST (payload v1) event for an ASGI request."""
    multi_headers: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        if name.lower().startswith(b"x-forwarded-") and not trust_forwarded:
            continue
        multi_headers.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
    multi_query: dict[str, list[str]] = {}
    for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        multi_query.setdefault(name, []).append(value)
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    client = scope.get("client") or ("127.0.0.1", 0)
    server = scope.get("server")
    # As API Gateway REST gives it: percent-encoding kept (`a%2Fb` is one segment), for routes to decode.
    path = (scope.get("raw_path") or b"").decode("latin-1") or scope["path"]
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": scope["method"],
        "headers": {name: values[-1] for name, values in multi_headers.items()},
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": scope["method"],
            "path": path,
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": client[0]},
            # This server's own socket, which API Gateway events lack: no webhook may lead back to it.
            **({"serverAddress": _host_port(*server)} if server else {}),
        },
        "body": text if body else None,
        "isBase64Encoded": encoded,
    }


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ClientGone(Exception):
    """The client disconnected before its body was complete."""


async def read_body(receive: Receive) -> bytes | None:
    """The whole body; None when it is too large for Lambda."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large() -> dict[str, Any]:
    return _error(413, "payload_too_large", f"The request exceeds {MAX_REQUEST_BYTES} bytes.")


def _error(status: int, code: str, message: str) -> dict[str, Any]:
    """An answer given before the resolver sees the request, in the resolver's error shape."""
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": error_body(code, message)}


def error_body(code: str, message: str) -> str:
    """The resolver's error shape, for answers this server gives without it."""
    return json.dumps({"error": {"code": code, "message": message}})


async def _send(send: Send, response: dict[str, Any]) -> None:
    body = response.get("body") or ""
    payload = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
    await send(_start(response))
    await send({"type": "http.response.body", "body": payload})


def _start(response: dict[str, Any]) -> dict[str, Any]:
    """The ASGI message that opens an answer: its status and headers."""
    headers: list[tuple[bytes, bytes]] = []
    for name, value in (response.get("headers") or {}).items():
        headers.append((name.lower().encode(), str(value).encode()))
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers.extend((name.lower().encode(), str(value).encode()) for value in values)
    return {"type": "http.response.start", "status": response.get("statusCode", 200), "headers": headers}


async def _cancel_on_disconnect(receive: Receive, group: TaskGroup) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    group.cancel_scope.cancel()


def _close(chunks: Any) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()
