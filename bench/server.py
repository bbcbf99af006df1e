"""Servers as subprocesses on the benchmark's DynamoDB Local: `cairn serve`, and the HTTP floor under it."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Self

import httpx

from bench.http_floor import READY_LINE as FLOOR_READY_LINE
from cairn.local.dynamodb_local import free_port
from cairn.settings import MAX_EVENTS_LIMIT

READY_LINE = "Cairn is serving on"
# `bench` is not installed: the floor server imports it from the checkout.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Rate limits and the feed quota would otherwise turn a load test into 429s and 409s. At the largest
# feed a deployment may set, a head's counters grow for 100,000 posts: the side-by-side part, which
# posts the longest, gives each round addresses of its own, so that a head is the size it reaches in use.
UNLIMITED_ENV = {
    "CAIRN_POLL_RATE_PER_MINUTE": "1000000000",
    "CAIRN_CREATE_RATE_PER_MINUTE": "1000000000",
    "CAIRN_MAX_EVENTS": str(MAX_EVENTS_LIMIT),
}
# Above the longest long-poll (25 s), so a waiting poll is never cut short.
HTTP_TIMEOUT = httpx.Timeout(30.0)


class ServerProcess:
    """`python -m <module> --port ... --dynamodb-endpoint ... --table ...` on a free port, ready once it
    prints `ready_line`, stopped with Ctrl-C (SIGINT)."""

    name = "server"
    module: tuple[str, ...] = ()
    ready_line = ""
    env: dict[str, str] = {}

    def __init__(self, dynamodb_endpoint: str, table: str, workdir: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._command = [
            sys.executable, "-m", *self.module,
            "--port", str(self.port),
            "--dynamodb-endpoint", dynamodb_endpoint,
            "--table", table,
        ]  # fmt: skip
        self._workdir = workdir
        self._output: collections.deque[str] = collections.deque(maxlen=50)
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            self._command,
            cwd=self._workdir,
            env={**os.environ, **self.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()
        threading.Thread(target=self._read_output, args=(ready,), daemon=True).start()
        if not ready.wait(60) or self._process.poll() is not None:
            self.__exit__()
            raise RuntimeError(f"{self.name} did not start:\n" + "".join(self._output))
        return self

    def _read_output(self, ready: threading.Event) -> None:
        # Drained to the end, so a chatty server never blocks on a full pipe.
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._output.append(line)
            if self.ready_line in line:
                ready.set()
        ready.set()

    def __exit__(self, *exc_info: object) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def client(self) -> httpx.Client:
        """A keep-alive client of its own; proxies from the environment are ignored."""
        return httpx.Client(base_url=self.base_url, timeout=HTTP_TIMEOUT, trust_env=False)


class CairnServer(ServerProcess):
    """`cairn serve` with the limits lifted (`UNLIMITED_ENV`)."""

    name = "cairn serve"
    module = ("cairn.cli", "serve")
    ready_line = READY_LINE
    env = UNLIMITED_ENV


class FloorServer(ServerProcess):
    """`bench.http_floor`: the raw transaction behind uvicorn, as `cairn serve` runs it, and nothing else."""

    name = "the HTTP floor"
    module = ("bench.http_floor",)
    ready_line = FLOOR_READY_LINE
    env = {"PYTHONPATH": str(PROJECT_ROOT)}
