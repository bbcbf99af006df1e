"""A LangGraph graph that pauses for a callback and is resumed, in a new process, by a Cairn wake-up.

    python examples/langgraph-wakeup/approval.py start --address review.json --thread release-1.4 [--url URL]
    python examples/langgraph-wakeup/approval.py runner --address review.json --thread release-1.4 [--port 8790]
    curl -X POST "$INBOX_URL" -H "Idempotency-Key: release-1.4" \\
      -d '{"type": "approval.decided", "source": "review-app", "data": {"approved": true, "by": "grace"}}'

`start` provisions an address, runs the graph on `CairnSaver` until its `ask`
node calls `interrupt()`, saves the address and exits: nothing waits in
memory. It prints the inbox URL, the one thing the service or person who
decides needs.

`runner` is where the next run starts: an HTTP receiver that subscribes the
address's `approval.decided` events to itself (a webhook), checks each
delivery's signature with `cairn.client.webhooks.verify`, and for each one
starts `resume` in a new process with the delivery on its stdin, printing a
JSON line per run. Ctrl-C ends it and its subscription.

`resume` reads the thread from Cairn and continues it with
`Command(resume=<the callback's data>)`, from the very checkpoint that was
waiting: a run started twice for one callback (deliveries are at least once,
and two runners each hold a subscription) finishes the graph once. The other
finds the thread no longer waiting, or loses the put to the first run
(`CheckpointStale`), and does nothing.
"""

from __future__ import annotations

import argparse
import json
import operator
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from cairn.client import Address, webhooks
from cairn.client.commands import url_option
from cairn.client.examples.common import run_example, show
from cairn.integrations.langgraph import CairnSaver, CheckpointStale

CALLBACK_TYPE = "approval.decided"


class Review(TypedDict):
    steps: Annotated[list[str], operator.add]
    decision: Any  # the callback's data, as the inbox read it


def draft(state: Review) -> dict[str, Any]:
    # A scripted chat model where a real one would answer: no network, the same every run.
    model = GenericFakeChatModel(messages=iter([AIMessage("Release 1.4: 3 fixes, 1 migration. Ship it?")]))
    return {"steps": [str(model.invoke("Summarise the release for its approver.").content)]}


def ask(state: Review) -> dict[str, Any]:
    # The run stops here and the process may exit; `Command(resume=...)` makes this call return the decision.
    decision = interrupt({"question": state["steps"][-1]})
    by = decision.get("by", "someone") if isinstance(decision, dict) else "someone"
    return {"decision": decision, "steps": [f"decided by {by}"]}


def act(state: Review) -> dict[str, Any]:
    approved = isinstance(state["decision"], dict) and state["decision"].get("approved") is True
    return {"steps": ["shipped" if approved else "held back"]}


def review_graph(saver: CairnSaver) -> CompiledStateGraph[Review, None, Review, Review]:
    builder = StateGraph(Review)
    builder.add_node("draft", draft)
    builder.add_node("ask", ask)
    builder.add_node("act", act)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "ask")
    builder.add_edge("ask", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def start(url: str, path: str, thread: str) -> dict[str, Any]:
    address = Address.provision(url, task_id=thread, expires_in=7 * 24 * 3600)
    address.save(path)
    graph = review_graph(CairnSaver(address))
    waiting = graph.invoke({"steps": [], "decision": None}, {"configurable": {"thread_id": thread}})
    return {"inbox_url": address.inbox_url, "waiting_for": [found.value for found in waiting["__interrupt__"]]}


def resume(path: str, thread: str, delivery: dict[str, Any]) -> dict[str, Any]:
    graph = review_graph(CairnSaver(Address.restore(path)))
    state = graph.get_state({"configurable": {"thread_id": thread}})
    ran = {"thread": thread, "event": delivery["event"]["id"]}
    if not state.interrupts:
        return {**ran, "outcome": "not_waiting"}  # an earlier run took this callback, or another one
    try:
        # Pinned to the checkpoint that was waiting: if another run has continued it since, this run's put
        # no longer continues the thread's head, and the checkpointer refuses it.
        finished = graph.invoke(Command(resume=delivery["event"]["data"]), state.config)
    except CheckpointStale:
        return {**ran, "outcome": "resumed_elsewhere"}
    return {**ran, "outcome": "finished", "decision": finished["decision"], "steps": finished["steps"]}


class Runner:
    """The webhook receiver: every signed `approval.decided` delivery starts `resume` in a process of its own."""

    def __init__(self, path: str, thread: str) -> None:
        self.path, self.thread = path, thread
        self.secret = ""
        self._printing = threading.Lock()
        self._runs: list[threading.Thread] = []

    def wake(self, headers: dict[str, str], body: bytes) -> int:
        try:
            delivery = webhooks.verify(headers, body, self.secret)
        except webhooks.InvalidSignature:
            return 401
        if delivery["type"] == CALLBACK_TYPE:
            run = threading.Thread(target=self._run, args=(delivery,))
            self._runs.append(run)
            run.start()
        # Accepted once the run is started: the answer must come within the delivery's deadline, the run need not.
        return 202

    def _run(self, delivery: dict[str, Any]) -> None:
        command = [sys.executable, __file__, "resume", "--address", self.path, "--thread", self.thread]
        done = subprocess.run(command, input=json.dumps(delivery), capture_output=True, text=True, check=False)
        result = json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr.strip()[-2000:]}
        self.say({"delivery": delivery["event"]["id"], "run": result})

    def say(self, line: dict[str, Any]) -> None:
        with self._printing:
            print(json.dumps(line), flush=True)

    def finish(self) -> None:
        for run in self._runs:
            run.join()


def serve(path: str, thread: str, port: int, public_url: str | None) -> None:
    runner = Runner(path, thread)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = runner.wake({name.lower(): value for name, value in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    url = public_url or f"http://127.0.0.1:{server.server_address[1]}/wake"
    address = Address.restore(path)
    created = address.subscriptions.create(
        {"kind": "webhook", "url": url}, types=[CALLBACK_TYPE], description=f"resume {thread}"
    )
    runner.secret = created["secret"]
    # Ctrl-C and SIGTERM both stop it, even when started in the background by a shell, which ignores SIGINT there.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    runner.say({"listening": url, "subscription": created["subscription"]["id"]})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        address.subscriptions.delete(created["subscription"]["id"])
        runner.finish()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    thread = argparse.ArgumentParser(add_help=False)
    thread.add_argument("--address", required=True, help="the address file start saves (owner-only)")
    thread.add_argument("--thread", required=True, help="the LangGraph thread id")
    steps.add_parser("start", parents=[url_option(), thread])
    listen = steps.add_parser("runner", parents=[thread])
    listen.add_argument("--port", type=int, default=0, help="on 127.0.0.1 (default: any free port)")
    listen.add_argument("--public-url", help="the URL Cairn reaches this receiver on, if not http://127.0.0.1")
    steps.add_parser("resume", parents=[thread], help="started by runner: the delivery's JSON on stdin")
    args = parser.parse_args()
    if args.step == "start":
        show(start(args.url, args.address, args.thread))
    elif args.step == "runner":
        serve(args.address, args.thread, args.port, args.public_url)
    else:
        print(json.dumps(resume(args.address, args.thread, json.load(sys.stdin))))


if __name__ == "__main__":
    run_example(main)
