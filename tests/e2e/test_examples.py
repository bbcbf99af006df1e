"""The SDK examples and examples/langgraph-wakeup, each run as a user would: separate processes against `cairn serve`."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.client import Address
from cairn.integrations.langgraph import CairnSaver
from cairn.local.dynamodb_local import free_port
from tests.support.serve import ServeProcess, wait_until

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server


def example(name: str, *args: str, url: str | None = None, background: bool = False) -> Any:
    """Run one example; its JSON answer, or the process when it runs in the background."""
    return _run([sys.executable, "-m", f"cairn.client.examples.{name}", *args], url=url, background=background)


_IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"
)


def _run(command: list[str], *, url: str | None = None, background: bool = False) -> Any:
    env = {**os.environ, **({"CAIRN_URL": url} if url else {})}
    if background:
        # Started as a shell starts a background job, with SIGINT ignored (an ignored signal stays ignored across
        # exec): a process that stops on Ctrl-C must say so itself.
        command = [sys.executable, "-c", _IGNORING_SIGINT, *command]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_runs_share_a_plan_and_one_history(served: ServeProcess, tmp_path: Path):
    saved = str(tmp_path / "plan.json")
    first = example("two_run", "first", "--address", saved, url=served.base_url)
    second = example("two_run", "second", "--address", saved, url=served.base_url)

    assert first["pid"] != second["pid"]
    assert [step["revision"] for step in second["completed"]] == [2, 3, 4]
    history = [(entry["type"], entry["data"].get("run"), entry["data"].get("revision")) for entry in second["history"]]
    assert history == [
        ("run.started", 1, None),
        ("state.updated", None, 1),
        ("run.started", 2, None),
        ("state.updated", None, 2),
        ("state.updated", None, 3),
        ("state.updated", None, 4),
    ]
    todo = Address.restore(saved).state.get("todo")["value"]
    assert {item["done_by_pid"] for item in todo["items"]} == {second["pid"]}


def test_an_agent_resumes_in_a_new_process_when_the_callback_lands(served: ServeProcess, tmp_path: Path):
    saved, cursor = str(tmp_path / "agent.json"), str(tmp_path / "agent.cursor")
    started = example("async_callback", "start", "--address", saved, "--job", "render-42", url=served.base_url)
    resumed = example("async_callback", "resume", "--address", saved, "--cursor", cursor, background=True)
    time.sleep(1.0)
    assert resumed.poll() is None, "the agent resumed before any callback arrived"
    worker = ("async_callback", "worker", "--inbox-url", started["inbox_url"], "--job", "render-42")
    delivered = example(*worker)
    retried = example(*worker)
    assert retried == {**delivered, "duplicate": True}

    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    result = json.loads(out)
    assert result["event"] == delivered["event"]["id"]
    assert result["job"] == {"id": "render-42", "status": "done", "result": {"job": "render-42", "frames": 240}}
    assert Path(cursor).read_text().strip() == str(result["sequence"])
    events = Address.restore(saved).events.poll()["events"]
    assert next(e for e in events if e["id"] == result["event"])["acknowledged_at"]


def test_concurrent_runs_update_one_progress_record_without_losing_a_step(served: ServeProcess):
    result = example("concurrent_runs", "--runs", "2", "--steps", "25", url=served.base_url)
    assert result["expected"] == 50
    assert result["progress"] == {"count": 50, "by_run": {"A": 25, "B": 25}}
    assert result["revision"] == 50


def test_an_example_that_cannot_reach_the_server_prints_the_cli_error_not_a_traceback(tmp_path: Path):
    nobody = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "cairn.client.examples.two_run", "first", "--address", str(tmp_path / "p.json")]
    done = subprocess.run(command, env={**os.environ, "CAIRN_URL": nobody}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1  # as `cairn` exits when the server could not be reached
    assert "Traceback" not in done.stderr
    assert json.loads(done.stderr)["error"]["code"] == "connection_failed"
    assert done.stdout == ""


# -- examples/langgraph-wakeup: a LangGraph graph resumed by a wake-up -------------

APPROVAL = Path(__file__).resolve().parents[2] / "examples" / "langgraph-wakeup" / "approval.py"
DECIDED = {"type": "approval.decided", "source": "review-app", "data": {"approved": True, "by": "grace"}}
FINISHED_STEPS = ["Release 1.4: 3 fixes, 1 migration. Ship it?", "decided by grace", "shipped"]


def approval(*args: str, url: str | None = None, background: bool = False) -> Any:
    # faulthandler: a runner that does not stop is sent SIGABRT, and its threads' stacks say where it was.
    return _run([sys.executable, "-X", "faulthandler", str(APPROVAL), *args], url=url, background=background)


class ApprovalRunner:
    """`approval.py runner` in the background: its JSON lines, each read within a deadline."""

    def __init__(self, saved: str, thread: str, served: ServeProcess) -> None:
        self._served, self._saved = served, saved
        self.process: subprocess.Popen = approval("runner", "--address", saved, "--thread", thread, background=True)
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.ready = self.next_line()
        except BaseException:
            self.__exit__()
            raise
        self.url = self.ready["listening"]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def next_line(self, timeout: float = 90.0) -> dict[str, Any]:
        try:
            return json.loads(self._lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(self._silent()) from None

    def _silent(self) -> str:
        """Why a line never came: the runner's own errors (it is stopped for them) and what the server logged."""
        exit_code = self.process.poll()
        if exit_code is None:
            self.process.send_signal(signal.SIGABRT)  # faulthandler prints where each of its threads was
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.__exit__()
        errors = self.process.stderr.read()[-4000:] if self.process.stderr else ""
        served = "".join(self._served.output[-60:])
        try:
            subscription = Address.restore(self._saved).subscriptions.get(self.ready["subscription"])
        except Exception as error:  # noqa: BLE001 (a diagnosis, whatever it finds)
            subscription = repr(error)
        return (
            f"the runner printed nothing more; exit code {exit_code}\nits subscription: {subscription}\n"
            f"its stderr:\n{errors}\nthe server's last lines:\n{served}"
        )

    def stop(self) -> list[dict[str, Any]]:
        """Ctrl-C: it ends its subscription and waits for its runs; the lines it had not been asked for."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=30)
        assert self.process.returncode == 0, self.process.stderr.read() if self.process.stderr else ""
        self._reader.join(timeout=30)  # it reaches the end of the output once the runner has exited
        rest = []
        while not self._lines.empty():
            rest.append(json.loads(self._lines.get_nowait()))
        return rest

    def __enter__(self) -> ApprovalRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def _history(saved: str, thread: str) -> list:
    """The thread's checkpoints, newest first; fails on a fork (a checkpoint continued twice)."""
    history = list(CairnSaver(Address.restore(saved)).list({"configurable": {"thread_id": thread}}))
    parents = Counter(found.parent_config["configurable"]["checkpoint_id"] for found in history if found.parent_config)
    assert [parent for parent, children in parents.items() if children > 1] == []
    return history


def test_a_langgraph_graph_waiting_for_a_callback_is_finished_by_the_run_its_wake_up_starts(
    served: ServeProcess, tmp_path: Path
):
    saved, thread = str(tmp_path / "review.json"), "release-1.4"
    started = approval("start", "--address", saved, "--thread", thread, url=served.base_url)
    assert started["waiting_for"] == [{"question": "Release 1.4: 3 fixes, 1 migration. Ship it?"}]
    waiting = len(_history(saved, thread))

    with ApprovalRunner(saved, thread, served) as runner:
        # Not signed by the subscription's secret: refused, and no run starts.
        forged = {
            "webhook-id": "evt_forged",
            "webhook-timestamp": str(int(time.time())),
            "webhook-signature": "v1,Zm9v",
        }
        assert httpx.post(runner.url, json={"type": "approval.decided"}, headers=forged).status_code == 401
        # The deciding service posts its callback, and retries it under the same key.
        key = {"Idempotency-Key": "release-1.4:decided"}
        first = httpx.post(started["inbox_url"], json=DECIDED, headers=key).json()
        retried = httpx.post(started["inbox_url"], json=DECIDED, headers=key).json()
        assert retried == {**first, "duplicate": True}

        woke = runner.next_line()
        event = first["event"]["id"]
        assert woke["delivery"] == event
        assert woke["run"] == {
            "thread": thread,
            "event": event,
            "outcome": "finished",
            "decision": DECIDED["data"],
            "steps": FINISHED_STEPS,
        }
        address = Address.restore(saved)
        (subscription,) = address.subscriptions.list()
        assert subscription["id"] == runner.ready["subscription"]
        # Cairn records the attempt once the runner has answered, which it did before the run began.
        assert wait_until(lambda: address.subscriptions.get(subscription["id"])["attempts"])
        attempts = address.subscriptions.get(subscription["id"])["attempts"]
        assert [(attempt["outcome"], attempt["status_code"]) for attempt in attempts] == [("delivered", 202)]
        rest = runner.stop()

    # One event for the two posts, one delivery, one run: the retry started nothing.
    assert [e["id"] for e in address.events.poll()["events"] if e["type"] == "approval.decided"] == [event]
    assert rest == []
    assert address.subscriptions.list() == []  # the runner ended its subscription on the way out
    assert len(_history(saved, thread)) == waiting + 2  # the resumed `ask`, then `act`


def test_a_callback_delivered_twice_finishes_the_graph_once(served: ServeProcess, tmp_path: Path):
    """Two runners, each with its subscription: both get the callback and start a run; one finishes the graph."""
    saved, thread = str(tmp_path / "review.json"), "release-1.5"
    started = approval("start", "--address", saved, "--thread", thread, url=served.base_url)
    waiting = len(_history(saved, thread))

    with ApprovalRunner(saved, thread, served) as one, ApprovalRunner(saved, thread, served) as other:
        posted = httpx.post(started["inbox_url"], json=DECIDED, headers={"Idempotency-Key": "decided"}).json()
        runs = [one.next_line(), other.next_line()]
        assert one.stop() == [] and other.stop() == []

    event = posted["event"]["id"]
    assert [woke["delivery"] for woke in runs] == [event, event]
    outcomes = Counter(woke["run"]["outcome"] for woke in runs)
    # The second run found the thread no longer waiting, or lost its put to the first: it stored nothing.
    assert outcomes["finished"] == 1 and outcomes["not_waiting"] + outcomes["resumed_elsewhere"] == 1
    (finished,) = [woke["run"] for woke in runs if woke["run"]["outcome"] == "finished"]
    assert finished["steps"] == FINISHED_STEPS and finished["decision"] == DECIDED["data"]
    history = _history(saved, thread)
    assert len(history) == waiting + 2  # as after one run
    assert history[0].checkpoint["channel_values"]["steps"] == FINISHED_STEPS
