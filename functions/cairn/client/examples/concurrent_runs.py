"""Concurrent runs, one progress record, nothing lost.

    python -m cairn.client.examples.concurrent_runs [--url URL] [--runs 2] [--steps 20]

Provisions an address, then starts `--runs` worker processes that each
record `--steps` steps in the same `progress` key with `state.update`, a
compare-and-set that reads again and retries whenever another run wrote
first. Prints the final record: its count is runs × steps.

    python -m cairn.client.examples.concurrent_runs worker --address FILE --name A --steps 20

is one such run on its own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cairn.client import Address
from cairn.client.commands import url_option
from cairn.client.examples.common import run_example, show


def record_step(progress: dict[str, Any], name: str) -> dict[str, Any]:
    by_run = dict(progress["by_run"])
    by_run[name] = by_run.get(name, 0) + 1
    return {"count": progress["count"] + 1, "by_run": by_run}


def worker(path: str, name: str, steps: int) -> dict[str, Any]:
    address = Address.restore(path)
    attempts = 0

    def step(progress: dict[str, Any]) -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        return record_step(progress, name)

    for _ in range(steps):
        address.state.update("progress", step, default={"count": 0, "by_run": {}})
    return {"run": name, "steps": steps, "attempts": attempts}


def orchestrate(url: str, runs: int, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "address.json")
        address = Address.provision(url, task_id="concurrent-runs-example", expires_in=3600)
        address.save(path)
        command = [sys.executable, "-m", __spec__.name, "worker", "--address", path, "--steps", str(steps)]
        workers = [
            subprocess.Popen([*command, "--name", chr(ord("A") + index)], stdout=subprocess.DEVNULL)
            for index in range(runs)
        ]
        failed = [process.args for process in workers if process.wait() != 0]
        if failed:
            raise SystemExit(f"workers failed: {failed}")
        progress = address.state.get("progress")
    return {"expected": runs * steps, "progress": progress["value"], "revision": progress["revision"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[url_option()]
    )
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    commands = parser.add_subparsers(dest="command")
    one = commands.add_parser("worker")
    one.add_argument("--address", required=True)
    one.add_argument("--name", required=True)
    one.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if args.command == "worker":
        show(worker(args.address, args.name, args.steps))
    else:
        show(orchestrate(args.url, args.runs, args.steps))


if __name__ == "__main__":
    run_example(main)
