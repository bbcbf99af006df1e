"""Run `cairn serve` as a separate process, as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from cairn.local.dynamodb_local import free_port

READY_LINE = "Cairn is serving on"
# A free port is free when it is picked, not always when the server binds it: another process on the
# machine (a client's connection, another test's server) may take it in between. The server then ends
# saying so, and is started again on other ports.
PORT_TAKEN = ("address already in use", "cannot listen for SMTP")
PORT_ATTEMPTS = 3


class ServeProcess:
    """`cairn serve` on a free port; stopped with Ctrl-C (SIGINT) on exit."""

    def __init__(
        self,
        workdir: Path,
        *,
        dynamodb_endpoint: str | None = None,
        table: str | None = None,
        data_dir: Path | None = None,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._take_ports()
        self.output: list[str] = []
        arguments: list[str] = []
        if dynamodb_endpoint:
            arguments += ["--dynamodb-endpoint", dynamodb_endpoint]
        if table:
            arguments += ["--table", table]
        self.data_dir = data_dir or workdir / "data"
        arguments += ["--data-dir", str(self.data_dir)]
        self._arguments = arguments + (extra_args or [])
        self._env = {**os.environ, "CAIRN_POLL_RATE_PER_MINUTE": "100000", "CAIRN_CREATE_RATE_PER_MINUTE": "100000"}
        self._env.update(env or {})
        self._workdir = workdir
        self._cwd = cwd or Path(__file__).resolve().parents[2]
        self.process: subprocess.Popen | None = None

    def _take_ports(self) -> None:
        self.port = free_port()
        self.smtp_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:
        attempt = 1
        while not self._launch(timeout):
            output = "".join(self.output)
            self.kill()
            if attempt == PORT_ATTEMPTS or not any(sign in output for sign in PORT_TAKEN):
                raise RuntimeError("cairn serve did not start:\n" + output)
            self._take_ports()
            attempt += 1
        return self

    def _launch(self, timeout: float) -> bool:
        """Start the server on this object's ports; True once it listens, False if it ended first."""
        self.output = []
        ports = ["--port", str(self.port), "--smtp-port", str(self.smtp_port)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli", "serve", *ports, *self._arguments],
            cwd=self._cwd,
            env=self._env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()
        threading.Thread(target=self._read_output, args=(ready,), daemon=True).start()
        if not ready.wait(timeout):
            self.kill()
            raise RuntimeError("cairn serve did not start:\n" + "".join(self.output))
        return any(READY_LINE in line for line in self.output)

    def _read_output(self, ready: threading.Event) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if READY_LINE in line:
                ready.set()
        ready.set()

    def stop(self, timeout: float = 30.0) -> int:
        """Ctrl-C, as a person at the terminal would; returns the exit code."""
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        finally:
            self.process = None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(40.0), **kwargs)

    @property
    def runtime_key(self) -> str:
        """The key `cairn serve` made for itself (given none) and keeps in its data directory."""
        return (self.data_dir / "runtime-key").read_text().strip()

    @property
    def worker_headers(self) -> dict[str, str]:
        """What a worker sends on the runtime and memory routes: the runtime key as a bearer token."""
        return {"Authorization": f"Bearer {self.runtime_key}"}

    def worker_client(self, **kwargs: Any) -> httpx.Client:
        """A client for the runtime and memory routes, carrying the runtime key on every request."""
        return self.client(headers=self.worker_headers, **kwargs)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.kill()


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
