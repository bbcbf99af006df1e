"""The SDK examples, each run as a user would: separate processes against `cairn serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.client import Address
from cairn.local.dynamodb_local import free_port
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server


def example(name: str, *args: str, url: str | None = None, background: bool = False) -> Any:
    """Run one example; its JSON answer, or the process when it runs in the background."""
    command = [sys.executable, "-m", f"cairn.client.examples.{name}", *args]
    env = {**os.environ, **({"CAIRN_URL": url} if url else {})}
    if background:
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
