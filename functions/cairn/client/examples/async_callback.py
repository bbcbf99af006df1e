"""An agent hands out its inbox URL and exits; a later process resumes when the callback lands.

    python -m cairn.client.examples.async_callback start --address agent.json --job render-42 [--url URL]
    python -m cairn.client.examples.async_callback worker --inbox-url URL --job render-42
    python -m cairn.client.examples.async_callback resume --address agent.json --cursor agent.cursor

`start` provisions, records the job as waiting and prints the inbox URL (the
write-only capability a worker needs). `worker` posts the result there, with
an idempotency key so a retried post never arrives twice. `resume`, in a new
process, follows the feed from its saved cursor until the result arrives,
records it in state and acknowledges it.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any

from cairn.client import Address, Inbox
from cairn.client.commands import url_option
from cairn.client.examples.common import run_example, show
from cairn.client.models import Delivery

RESULT_TYPE = "render.completed"


def start(url: str, path: str, job: str) -> dict[str, Any]:
    address = Address.provision(url, task_id=job, expires_in=3600)
    address.state.set("job", {"id": job, "status": "waiting"}, if_revision=0)
    address.save(path)
    return {"job": job, "inbox_url": address.inbox_url}


def worker(inbox_url: str, job: str) -> Delivery:
    with Inbox(inbox_url) as inbox:
        result = {"type": RESULT_TYPE, "source": "render-worker", "data": {"job": job, "frames": 240}}
        return inbox.post(result, idempotency_key=f"{job}:completed")


def _done(job: dict[str, Any], result: Any) -> dict[str, Any]:
    return {**job, "status": "done", "result": result}


def resume(path: str, cursor_path: str) -> dict[str, Any]:
    address = Address.restore(path)
    follower = address.events.follow(cursor_file=cursor_path)
    for event in follower:
        # Other events (the state change `start` made) are acknowledged as the loop moves on.
        if event["type"] == RESULT_TYPE:
            result = event
            job = address.state.update("job", partial(_done, result=result["data"]))
            # Handled: acknowledge it, save the cursor past it, and end the loop.
            follower.stop()
    return {"resumed_pid": os.getpid(), "event": result["id"], "sequence": result["sequence"], "job": job["value"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    begin = steps.add_parser("start", parents=[url_option()])
    begin.add_argument("--address", required=True)
    begin.add_argument("--job", required=True)
    work = steps.add_parser("worker")
    work.add_argument("--inbox-url", required=True)
    work.add_argument("--job", required=True)
    later = steps.add_parser("resume")
    later.add_argument("--address", required=True)
    later.add_argument("--cursor", required=True)
    args = parser.parse_args()
    if args.step == "start":
        show(start(args.url, args.address, args.job))
    elif args.step == "worker":
        show(worker(args.inbox_url, args.job))
    else:
        show(resume(args.address, args.cursor))


if __name__ == "__main__":
    run_example(main)
