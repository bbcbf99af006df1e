"""Two runs, one memory: run 1 plans and exits; run 2, another process, finishes the plan.

    python -m cairn.client.examples.two_run first --address plan.json [--url URL]
    python -m cairn.client.examples.two_run second --address plan.json

Run 1 provisions an address, saves a to-do list in its state, writes the
address to an owner-only file and exits. Run 2 restores the address from that
file, completes each item with a compare-and-set, and prints the feed: what
both runs did, in one order.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any

from cairn.client import Address
from cairn.client.commands import url_option
from cairn.client.examples.common import run_example, show

PLAN = ["fetch", "render", "publish"]


def first(url: str, path: str) -> dict[str, Any]:
    address = Address.provision(url, task_id="two-run-example", expires_in=3600)
    note(address, 1, "started")
    todo = {"items": [{"name": name, "done_by_pid": None} for name in PLAN]}
    written = address.state.set("todo", todo, if_revision=0)
    address.save(path)
    return {"run": 1, "pid": os.getpid(), "address_id": address.id, "todo_revision": written["revision"]}


def second(path: str) -> dict[str, Any]:
    address = Address.restore(path)
    note(address, 2, "started")
    completed = []
    for name in PLAN:
        # Compare-and-set: a concurrent writer makes this read again and re-apply, never overwrite.
        written = address.state.update("todo", partial(complete, name=name))
        completed.append({"item": name, "revision": written["revision"]})
    page = address.events.poll(after=0, limit=100)
    history = [{"sequence": e["sequence"], "type": e["type"], "data": e["data"]} for e in page["events"]]
    return {"run": 2, "pid": os.getpid(), "completed": completed, "history": history}


def complete(todo: dict[str, Any], name: str) -> dict[str, Any]:
    items = [{**item, "done_by_pid": os.getpid()} if item["name"] == name else item for item in todo["items"]]
    return {**todo, "items": items}


def note(address: Address, run: int, what: str) -> None:
    """Put a run's milestone in the feed, beside its state changes (idempotent if retried)."""
    payload = {"type": f"run.{what}", "source": "two-run-example", "data": {"run": run, "pid": os.getpid()}}
    address.inbox.post(payload, idempotency_key=f"run-{run}:{what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runs = parser.add_subparsers(dest="run", required=True)
    runs.add_parser("first", parents=[url_option()]).add_argument("--address", required=True)
    runs.add_parser("second").add_argument("--address", required=True)
    args = parser.parse_args()
    show(first(args.url, args.address) if args.run == "first" else second(args.address))


if __name__ == "__main__":
    run_example(main)
