"""Run `cairn serve`, and the other `cairn` commands, as separate processes, as a user would.

The process runs `cairn serve`'s command line (`cairn.cli.main`) in a process
forked from the test worker's server of processes (`tests.support.processes`),
which imported the server once: it listens after 0.15 s of processor time,
where a new interpreter, importing it again, took 0.7 s (for each of about a
hundred servers). The tests of the command itself start it as a user types it
(`command_line=True`). `run_command` runs an agent command the same way, as
`subprocess.run` would run it (a new interpreter took 0.4 s for each).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import httpx

from cairn.local.dynamodb_local import free_port
from cairn.tls import verified_context
from tests.support.processes import process_context

READY_LINE = "Cairn is serving on"
# A free port is free when it is picked, not always when the server binds it: another process on the
# machine (a client's connection, another test's server) may take it in between. The server then ends
# saying so, and is started again on other ports.
PORT_TAKEN = ("address already in use", "cannot listen for SMTP")
PORT_ATTEMPTS = 3
# How often a start looks at the server's output for its ready line.
READY_POLL_SECONDS = 0.02
_launches = itertools.count()


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
        command_line: bool = False,
    ) -> None:
        self._take_ports()
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
        self._command_line = command_line
        self._log: Path | None = None
        self.process: subprocess.Popen[bytes] | Forked | None = None

    def _take_ports(self) -> None:
        self.port = free_port()
        self.smtp_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"

    @property
    def output(self) -> list[str]:
        """What the server has printed so far (standard output and error), line by line."""
        if self._log is None or not self._log.exists():
            return []
        return self._log.read_text(errors="replace").splitlines(keepends=True)

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
        self._workdir.mkdir(parents=True, exist_ok=True)
        self._log = self._workdir / f"serve-{os.getpid()}-{next(_launches)}.log"
        self._log.touch()
        argv = ["serve", "--port", str(self.port), "--smtp-port", str(self.smtp_port), *self._arguments]
        if self._command_line:
            with self._log.open("w") as output:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "cairn.cli", *argv],
                    cwd=self._cwd,
                    env=self._env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
        else:
            self.process = Forked.start(argv, self._env, self._cwd, self._log)
        deadline = time.monotonic() + timeout
        while not self._printed(READY_LINE):
            if self.process.poll() is not None:
                return self._printed(READY_LINE)
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("cairn serve did not start:\n" + "".join(self.output))
            time.sleep(READY_POLL_SECONDS)
        return True

    def _printed(self, text: str) -> bool:
        return any(text in line for line in self.output)

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
        return httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(40.0), verify=verified_context(), **kwargs)

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


class Forked:
    """`cairn serve`'s command line in a process forked from the worker's server of processes.

    Seen by the tests as a `subprocess.Popen` is: its pid, `poll`, `wait`,
    `send_signal` and `kill`, and its exit code (negative for a signal).
    """

    def __init__(self, process: BaseProcess) -> None:
        self._process = process

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> Forked:
        # Daemonic: a worker that ends with a server still running stops it rather than waiting for it.
        process = process_context().Process(target=_serve, args=(argv, env, str(cwd), str(log)), daemon=True)
        process.start()
        return cls(process)

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired("cairn serve", timeout or 0)
        return code

    def send_signal(self, signal_number: int) -> None:
        os.kill(self.pid, signal_number)

    def kill(self) -> None:
        self._process.kill()


def _serve(argv: list[str], env: dict[str, str], cwd: str, log: str) -> None:
    """In the forked process: the output, folder and environment a started `cairn serve` would have, then it.

    The output first: whatever fails after it is in the log the test reports.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    output = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    from cairn import cli

    cli.main(argv)  # `serve` ends its process itself, with its exit code


Completed = subprocess.CompletedProcess[bytes]


def run_command(argv: list[str], env: dict[str, str], stdin: bytes = b"", timeout: float = 60.0) -> Completed:
    """`cairn <argv>` with `env`, fed `stdin`: its exit code and what it printed, as `subprocess.run` answers."""
    with tempfile.TemporaryDirectory(prefix="cairn-command-") as folder:
        streams = [os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")]
        Path(streams[0]).write_bytes(stdin)
        process = process_context().Process(target=_command, args=(argv, env, *streams), daemon=True)
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["cairn", *argv], timeout)
        out, err = (Path(stream).read_bytes() for stream in streams[1:])
        return subprocess.CompletedProcess(["cairn", *argv], process.exitcode, out, err)


def command_json(argv: list[str], env: dict[str, str]) -> Any:
    """What `cairn <argv>` printed, read as JSON, once it ended with 0 (an agent command's answer)."""
    done = run_command(argv, env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _command(argv: list[str], env: dict[str, str], stdin: str, stdout: str, stderr: str) -> None:
    """In the forked process: the standard streams and environment a started command would have, then it."""
    sys.stdout.flush()
    sys.stderr.flush()
    written = os.O_WRONLY | os.O_CREAT
    for number, path, flags in ((0, stdin, os.O_RDONLY), (1, stdout, written), (2, stderr, written)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, number)
        os.close(opened)
    # multiprocessing gives its processes /dev/null as standard input: this one reads the file, decoded as
    # the interpreter decodes its standard streams.
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=sys.stdout.encoding, errors=sys.stdout.errors)
    os.environ.clear()
    os.environ.update(env)
    from cairn import cli

    try:
        code = cli.main(argv)
    except SystemExit as ended:  # argparse's refusals: ended as the interpreter ends on them
        if ended.code is not None and not isinstance(ended.code, int):
            print(ended.code, file=sys.stderr)
        code = ended.code if isinstance(ended.code, int) else (0 if ended.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
