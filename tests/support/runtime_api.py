"""A Lambda Runtime API endpoint on 127.0.0.1, for the streaming loop to talk to.

It speaks the documented protocol: `GET /2018-06-01/runtime/invocation/next`
hands out queued events with Lambda's headers; responses and errors are
recorded as they arrive, chunked bodies decoded by hand so a test sees
exactly what went over the wire.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PREFIX = "/2018-06-01/runtime"
DELIMITER = b"\x00" * 8


@dataclass
class Posted:
    """One POST from the runtime: where it went, its headers, its body and how it was framed."""

    path: str
    headers: dict[str, str]
    body: bytes
    chunks: int = 0
    # When each chunk of a chunked body arrived (time.monotonic), with its bytes.
    arrivals: list[tuple[float, bytes]] = field(default_factory=list)

    def streamed(self) -> tuple[dict[str, Any], bytes]:
        """The prelude (status and headers) and the payload of a streamed answer."""
        prelude, _, payload = self.body.partition(DELIMITER)
        return json.loads(prelude), payload


def response_headers(prelude: dict[str, Any]) -> dict[str, str]:
    """The headers a client receives: API Gateway merges both maps, one value per name here."""
    merged = dict(prelude.get("headers") or {})
    for name, values in (prelude.get("multiValueHeaders") or {}).items():
        merged[name] = values[-1]
    return merged


@dataclass
class FakeRuntimeApi:
    _pending: queue.Queue = field(default_factory=queue.Queue)
    posted: queue.Queue = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def invoke(self, event: dict[str, Any], *, deadline_ms: int = 0, trace_id: str | None = None) -> str:
        """Queue one invocation; returns its request id."""
        request_id = str(uuid.uuid4())
        self._pending.put((request_id, event, deadline_ms, trace_id))
        return request_id

    def next_post(self, timeout: float = 30) -> Posted:
        return self.posted.get(timeout=timeout)

    def __enter__(self) -> FakeRuntimeApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(api: FakeRuntimeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # As Lambda's own endpoint answers: no write held back waiting for an ACK.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path != f"{PREFIX}/invocation/next":
                self._answer(404, b"{}")
                return
            request_id, event, deadline_ms, trace_id = api._pending.get()
            headers = {
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": "arn:aws:lambda:us-east-1:123456789012:function:downloads",
            }
            if trace_id is not None:
                headers["Lambda-Runtime-Trace-Id"] = trace_id
            self._answer(200, json.dumps(event).encode(), headers)

        def do_POST(self) -> None:
            chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
            arrivals: list[tuple[float, bytes]] = []
            body, chunks = self._read_chunked(arrivals) if chunked else (self._read_sized(), 0)
            api.posted.put(Posted(self.path, dict(self.headers.items()), body, chunks, arrivals))
            self._answer(202, b'{"status":"OK"}')

        def _read_sized(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))

        def _read_chunked(self, arrivals: list[tuple[float, bytes]]) -> tuple[bytes, int]:
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    # Trailer section: header lines up to an empty line.
                    while self.rfile.readline().strip():
                        pass
                    return b"".join(parts), len(parts)
                parts.append(self.rfile.read(size))
                arrivals.append((time.monotonic(), parts[-1]))
                self.rfile.readline()

        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
BOOTSTRAP = FUNCTIONS / "cairn" / "entrypoints" / "stream_bootstrap"


def lambda_environment(runtime_api: FakeRuntimeApi, **cairn: str) -> dict[str, str]:
    """What Lambda sets for the function, plus its Cairn configuration."""
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "LAMBDA_TASK_ROOT": str(FUNCTIONS),
        "AWS_LAMBDA_RUNTIME_API": runtime_api.address,
        "AWS_LAMBDA_FUNCTION_NAME": "cairn-downloads",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "POWERTOOLS_SERVICE_NAME": "cairn",
        **{f"CAIRN_{name.upper()}": value for name, value in cairn.items()},
    }


@contextmanager
def streaming_function(runtime_api: FakeRuntimeApi, **cairn: str) -> Iterator[None]:
    """The streaming function's exec wrapper, started the way Lambda starts it (its own arguments are ignored)."""
    environment = lambda_environment(runtime_api, **cairn)
    process = subprocess.Popen([str(BOOTSTRAP), "/var/runtime/bootstrap"], env=environment, cwd="/")
    try:
        yield
    finally:
        process.kill()
        process.wait()
