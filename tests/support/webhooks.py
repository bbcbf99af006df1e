"""A webhook receiver on 127.0.0.1 whose answers a test scripts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """Records every POST; answers each with the next scripted status (then `default`)."""

    def __init__(self, statuses: list[int] | None = None, default: int = 200) -> None:
        self.received: list[Received] = []
        # `time.perf_counter()` at each arrival, for latency figures.
        self.arrival_times: list[float] = []
        self._statuses = list(statuses or [])
        self._default = default
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.url = ""

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            self.received.append(Received(headers, body))
            self.arrival_times.append(time.perf_counter())
            self._arrived.notify_all()
            return self._statuses.pop(0) if self._statuses else self._default

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """The first `count` requests, once they have arrived (fails the test after `timeout`)."""
        with self._lock:
            if not self._arrived.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"{len(self.received)} of {count} webhook requests arrived")
            return list(self.received[:count])


@contextmanager
def receiver(statuses: list[int] | None = None, default: int = 200, path: str = "/hook") -> Iterator[Receiver]:
    """A `Receiver` listening on 127.0.0.1 while the block runs; its `url` ends with `path`."""
    target = Receiver(statuses, default)

    class Handler(_QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            headers, body = self.received()
            self.send_response(target.answer(headers, body))
            self.send_header("Content-Length", "0")
            self.end_headers()

    with _serving(Handler) as origin:
        target.url = origin + path
        yield target


class Holder:
    """A receiver that starts each answer and never finishes it on its own.

    It sends its status line, then one header a byte at a time (a byte every
    `interval`), each byte well within any per-read timeout, until the test
    releases it (the answer then ends: 200) or the sender hangs up (`cut`).
    Requests that arrive after the release are answered at once.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.received: list[Received] = []
        self.arrived = threading.Event()
        self.cut = threading.Event()
        self.released = threading.Event()
        self.url = ""
        self._lock = threading.Lock()

    def release(self) -> None:
        self.released.set()

    @property
    def holding(self) -> bool:
        """A request arrived and its answer is still being held open."""
        return self.arrived.is_set() and not self.cut.is_set() and not self.released.is_set()

    def record(self, headers: dict[str, str], body: bytes) -> None:
        with self._lock:
            self.received.append(Received(headers, body))
        self.arrived.set()


@contextmanager
def holding_receiver(interval: float = 0.1, path: str = "/slow") -> Iterator[Holder]:
    """A `Holder` listening on 127.0.0.1 while the block runs; released on the way out."""
    target = Holder(interval)

    class Handler(_QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            target.record(*self.received())
            self.close_connection = True
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trickle: ")
                while not target.released.wait(target.interval):
                    self.wfile.write(b"a")
                self.wfile.write(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                target.cut.set()

    with _serving(Handler) as origin:
        target.url = origin + path
        try:
            yield target
        finally:
            target.release()


class _QuietHandler(BaseHTTPRequestHandler):
    """Reads a POST's headers (lower-cased) and body; logs nothing."""

    def received(self) -> tuple[dict[str, str], bytes]:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        return {k.lower(): v for k, v in self.headers.items()}, body

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` answering on a free port of 127.0.0.1 while the block runs; yields the origin URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
