"""The least a Python server on uvicorn does per inbox post: the floor under `cairn serve`'s figure.

    python -m bench.http_floor --port PORT --dynamodb-endpoint URL --table NAME

It serves with `cairn serve`'s uvicorn settings (its httptools protocol, uvloop
when installed, a worker thread per request through anyio), and a POST to
`/floor/{head}/{writer}` reads the body, parses its JSON, commits the raw
transaction of a post's three actions (`bench.baseline`'s, the writer's own
appender on that head) on a worker thread and answers 202 with a small JSON
body. No routing, credentials, validation, idempotency lookup, feed counters
or API Gateway event: set beside the raw transaction from threads, it shows
what HTTP and the hop to a thread cost by themselves, and set beside Cairn's
posts, what Cairn adds above them.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import anyio
import anyio.to_thread
import uvicorn

from bench.baseline import SAME_ACTIONS, RawAppender, appending
from cairn.dynamodb.client import make_client
from cairn.local.asgi import Receive, Send, read_body
from cairn.local.http_protocol import JsonErrorHttpToolsProtocol
from cairn.settings import Settings

READY_LINE = "HTTP floor serving on"


class FloorApp:
    """ASGI application: one raw append per POST, on the appender of the path's writer."""

    def __init__(self, settings: Settings) -> None:
        self._client = make_client(settings)
        self._table = settings.table_name
        self._appends: dict[str, Callable[[], str]] = {}
        self._limiter = anyio.CapacityLimiter(1024)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        # Read as `cairn serve` reads a body (the bench's bodies are far below its bound).
        json.loads(await read_body(receive) or b"")
        await anyio.to_thread.run_sync(self._append_for(scope["path"]), limiter=self._limiter)
        answer = b'{"accepted":true}'
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 202, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    def _append_for(self, path: str) -> Callable[[], str]:
        """The append of the path's writer: its own guess of the head's sequence, as the raw side's writers."""
        if path not in self._appends:
            head = unquote(path.split("/")[2])
            self._appends[path] = appending(RawAppender(self._client, self._table, head), self._table, SAME_ACTIONS)
        return self._appends[path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_floor", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dynamodb-endpoint", required=True)
    parser.add_argument("--table", required=True)
    args = parser.parse_args(argv)
    app = FloorApp(Settings(dynamodb_endpoint=args.dynamodb_endpoint, table_name=args.table))
    config = uvicorn.Config(app, lifespan="off", http=JsonErrorHttpToolsProtocol, log_level="warning", backlog=2048)
    # Listening before the ready line, so a client that reads it is queued rather than refused.
    listening = socket.create_server(("127.0.0.1", args.port), backlog=config.backlog)
    print(f"{READY_LINE} http://127.0.0.1:{args.port}", flush=True)
    uvicorn.Server(config).run(sockets=[listening])
    return 0


if __name__ == "__main__":
    sys.exit(main())
