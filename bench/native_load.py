"""Inbox posts driven by wrk, a load generator in C, so the figure is the server's and not a Python client's.

A Python client on the same two cores spends about as much time per request
as the server does (httpx about 1.3 ms more than `http.client`), and its
threads share one interpreter lock: what it measures is partly itself. wrk
keeps one connection per thread and sends each request when the last answers,
as the Python clients do.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).with_name("posts.lua")


class WrkMissing(RuntimeError):
    """The load generator is not installed."""


@dataclass(frozen=True)
class WrkResult:
    requests: int
    seconds: float
    # Answers other than 2xx/3xx, and connections that failed or timed out.
    refused: int
    socket_errors: int
    p50_ms: float
    p99_ms: float

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


def post_load(base_url: str, paths: list[str], clients: int, seconds: float) -> WrkResult:
    """`clients` connections posting back to back for `seconds` (whole seconds, at least one), each to its path."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise WrkMissing("the benchmark drives cairn serve with wrk: `make bench` installs it")
    command = [
        wrk, f"--threads={clients}", f"--connections={clients}", f"--duration={max(1, math.ceil(seconds))}s",
        f"--script={SCRIPT}", base_url, "--", uuid.uuid4().hex, *paths,
    ]  # fmt: skip
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    figures = json.loads(output.strip().splitlines()[-1])
    return WrkResult(
        requests=figures["requests"],
        seconds=figures["microseconds"] / 1e6,
        refused=figures["refused"],
        socket_errors=figures["socket_errors"],
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
    )
