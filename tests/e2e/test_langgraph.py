"""`CairnSaver`, LangGraph's checkpointer on Cairn, against `cairn serve` over real HTTP.

LangGraph's own conformance suite, two processes racing on one thread, a
graph that waits for a human in one process and finishes in another, a
10 MB checkpoint, a prune under a `DeltaChannel`, and hostile requests to
the checkpoint routes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import operator
import os
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Annotated, TypedDict

import httpx
import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, BASE_CAPABILITIES, EXTENDED_CAPABILITIES
from langgraph.checkpoint.conformance.spec.test_copy_thread import ALL_COPY_THREAD_TESTS
from langgraph.checkpoint.conformance.spec.test_delete_for_runs import ALL_DELETE_FOR_RUNS_TESTS
from langgraph.checkpoint.conformance.spec.test_prune import ALL_PRUNE_TESTS
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from cairn.client import Address, HttpClient
from cairn.integrations.langgraph import CairnSaver, CheckpointStale
from cairn.integrations.langgraph.saver import MAX_INLINE_CHECKPOINT_BYTES
from tests.support import langgraph_runs
from tests.support.processes import process_context
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

ROOT = Path(__file__).resolve().parents[2]
# What CairnSaver implements: the base and every optional capability the suite knows.
CLAIMED = {capability.value for capability in ALL_CAPABILITIES}
OPTIONAL = {capability.value for capability in EXTENDED_CAPABILITIES}


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="langgraph", expires_in=3600) as created:
        yield created


def test_langgraph_conformance_suite_passes_every_capability_claimed(address: Address):
    @checkpointer_test(name="CairnSaver")
    async def cairn_saver():
        yield CairnSaver(address)

    report = asyncio.run(validate(cairn_saver))

    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == CLAIMED
    failures = {
        name: result.failures for name, result in report.results.items() if result.detected and not result.passed
    }
    assert failures == {}
    assert report.passed_all_base() and report.conformance_level() == "FULL"
    # The suite ran its tests: 58 in the base capabilities of langgraph-checkpoint-conformance 0.0.2,
    # and every one of each optional capability's.
    assert sum(report.results[capability.value].tests_passed for capability in BASE_CAPABILITIES) >= 58
    assert {name: report.results[name].tests_passed for name in OPTIONAL} == {
        "delete_for_runs": len(ALL_DELETE_FOR_RUNS_TESTS),
        "copy_thread": len(ALL_COPY_THREAD_TESTS),
        "prune": len(ALL_PRUNE_TESTS),
    }


def test_of_two_processes_resuming_one_checkpoint_one_commits_and_the_other_is_refused(
    address: Address, served: ServeProcess
):
    rounds = 15
    saver = CairnSaver(address)
    thread = generate_config("race")
    root = saver.put(thread, generate_checkpoint(), generate_metadata(step=0), {})

    context = process_context()
    barrier, results = context.Barrier(2), context.Queue()
    args = (served.base_url, address.id, address.read_token, "race", rounds, barrier, results)
    workers = [context.Process(target=langgraph_runs.race, args=args) for _ in range(2)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=240) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    won = sum(w for w, _ in outcomes)
    refused = sum(r for _, r in outcomes)
    assert won == rounds
    assert refused == 2 * rounds - won  # every loser was refused, none lost silently

    history = list(saver.list(thread))
    assert len(history) == rounds + 1  # the root and one checkpoint per round: no orphan
    children = Counter(found.parent_config["configurable"]["checkpoint_id"] for found in history if found.parent_config)
    forks = [parent for parent, count in children.items() if count > 1]
    assert forks == []
    # One chain: from the head back to the root through every checkpoint.
    by_id = {found.config["configurable"]["checkpoint_id"]: found for found in history}
    chain, cursor = [], history[0]
    while cursor is not None:
        chain.append(cursor.config["configurable"]["checkpoint_id"])
        cursor = by_id.get(cursor.parent_config["configurable"]["checkpoint_id"]) if cursor.parent_config else None
    assert len(chain) == rounds + 1 and chain[-1] == root["configurable"]["checkpoint_id"]


def test_a_put_that_continues_an_overtaken_checkpoint_is_refused_with_the_head(address: Address):
    saver = CairnSaver(address)
    first = saver.put(generate_config("stale"), generate_checkpoint(), generate_metadata(step=0), {})
    second = saver.put(first, generate_checkpoint(), generate_metadata(step=1), {})
    late = generate_checkpoint()

    with pytest.raises(CheckpointStale) as refusal:
        saver.put(first, late, generate_metadata(step=1), {})

    assert refusal.value.status == 409 and refusal.value.code == "checkpoint_stale"
    assert refusal.value.details["head"] == second["configurable"]["checkpoint_id"]
    assert saver.get_tuple(generate_config("stale", checkpoint_id=late["id"])) is None
    assert len(list(saver.list(generate_config("stale")))) == 2


def test_two_runs_starting_one_new_thread_leave_one_first_checkpoint(address: Address):
    one, other = CairnSaver(address), CairnSaver(address)
    config = generate_config("new-thread")
    assert one.get_tuple(config) is None and other.get_tuple(config) is None  # what LangGraph reads before it writes

    one.put(config, generate_checkpoint(), generate_metadata(step=-1), {})
    with pytest.raises(CheckpointStale):
        other.put(config, generate_checkpoint(), generate_metadata(step=-1), {})

    assert len(list(one.list(config))) == 1


def test_an_interrupted_graph_resumes_in_a_new_process_to_the_end(address: Address, served: ServeProcess):
    def run(*argv: str) -> dict:
        command = [sys.executable, "-m", "tests.support.langgraph_runs", *argv]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    where = (served.base_url, address.id, address.read_token, "review-1")
    waiting = run("start", *where)
    assert waiting == {
        "steps": ["drafted a plan"],
        "waiting_for": [{"question": "Approve the plan?", "steps": ["drafted a plan"]}],
    }

    finished = run("resume", *where, "yes")

    assert finished == {"steps": ["drafted a plan", "asked, answer yes", "done"], "approved": "yes", "next": []}


def test_resuming_from_a_checkpoint_behind_the_head_is_refused_as_a_fork(address: Address):
    graph = langgraph_runs.review_graph(CairnSaver(address))
    config = {"configurable": {"thread_id": "time-travel"}}
    graph.invoke({"steps": [], "approved": ""}, config)
    graph.invoke(Command(resume="yes"), config)
    before_ask = next(state for state in graph.get_state_history(config) if state.next == ("ask",))
    history = len(list(graph.get_state_history(config)))

    with pytest.raises(CheckpointStale):
        graph.invoke(None, before_ask.config)

    assert len(list(graph.get_state_history(config))) == history


def test_a_ten_megabyte_checkpoint_round_trips_exactly(address: Address):
    saver = CairnSaver(address)
    payload = os.urandom(10 * 1024 * 1024 + 7)
    checkpoint = generate_checkpoint(channel_values={"blob": payload, "note": "large"}, channel_versions={"blob": 1})

    stored = saver.put(generate_config("large"), checkpoint, generate_metadata(step=0), {"blob": 1})
    saver.put_writes(stored, [("blob", payload[: 3 * 1024 * 1024])], "task-large")

    found = saver.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"]["blob"] == payload
    assert found.checkpoint["channel_values"]["note"] == "large"
    assert found.pending_writes == [("task-large", "blob", payload[: 3 * 1024 * 1024])]


def test_prunes_and_copies_racing_a_writer_leave_every_thread_whole(address: Address):
    """A writer continues the thread while prunes and copies run: it is never refused or undone, and no
    reader of the thread or of a copy finds a missing part or a head that is not the newest checkpoint."""
    thread, rounds = "churned", 12
    # Over the inline limit: every checkpoint names an uploaded part.
    values = [os.urandom(MAX_INLINE_CHECKPOINT_BYTES + 1000) for _ in range(rounds + 1)]

    def checkpoint(step: int) -> dict:
        return generate_checkpoint(channel_values={"v": values[step]}, channel_versions={"v": step + 1})

    writer, churner, reader = CairnSaver(address), CairnSaver(address), CairnSaver(address)
    committed = [writer.put(generate_config(thread), checkpoint(0), generate_metadata(step=0), {"v": 1})]
    done = threading.Event()
    copies: list[str] = []

    def write() -> None:
        try:
            for step in range(1, rounds + 1):
                latest = writer.get_tuple(generate_config(thread))
                assert latest is not None
                committed.append(writer.put(latest.config, checkpoint(step), generate_metadata(step=step), {}))
        finally:
            done.set()

    def churn() -> None:
        while not done.is_set():
            churner.prune([thread])
            copies.append(f"copy-{len(copies)}")
            churner.copy_thread(thread, copies[-1])

    def read() -> int:
        reads = 0
        while not done.is_set():
            for thread_id in (thread, *copies[-1:]):
                found = reader.get_tuple(generate_config(thread_id))
                if found is not None:
                    assert found.checkpoint["channel_values"]["v"] in values  # every part there
                    reads += 1
        return reads

    with ThreadPoolExecutor(3) as pool:
        running = [pool.submit(write), pool.submit(churn), pool.submit(read)]
        outcomes = [future.result(timeout=600) for future in running]

    assert len(committed) == rounds + 1 and outcomes[2] > 0  # the writer was never refused
    assert copies
    for thread_id in (thread, *copies):
        history = list(reader.list(generate_config(thread_id)))
        assert history
        for found in history:
            assert found.checkpoint["channel_values"]["v"] in values
        # The newest checkpoint is the head: a writer continuing it commits.
        reader.put(history[0].config, generate_checkpoint(), generate_metadata(step=rounds + 1), {})
    # The writer's last checkpoint was the newest until the put above: no prune or copy moved the thread on.
    assert list(reader.list(generate_config(thread)))[1].config == committed[-1]


def _tally_graph(saver: BaseCheckpointSaver, snapshot_every: int = 4):
    """One step per superstep, each adding one line to `log`, until `n` reaches a multiple of 10.

    `log` is a `DeltaChannel`: a checkpoint stores its value whole only every
    `snapshot_every` updates, and between them LangGraph rebuilds it from
    the ancestors' writes.
    """

    log = DeltaChannel(lambda value, writes: [*(value or []), *chain(*writes)], snapshot_frequency=snapshot_every)
    # Spelled as a call: a class body's annotations would be read as text, where `log` is out of reach.
    tally = TypedDict("tally", {"log": Annotated[list[str], log], "n": int})  # type: ignore[misc]  # noqa: UP013
    builder = StateGraph(tally)
    builder.add_node("step", lambda state: {"log": [f"step {state['n']}"], "n": state["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda state: END if state["n"] % 10 == 0 else "step")
    return builder.compile(checkpointer=saver)


def test_keep_latest_keeps_what_a_delta_channel_rebuilds_its_value_from(address: Address):
    """A prune leaves the newest checkpoint and the ancestors back to the channel's last full value."""
    graph = _tally_graph(CairnSaver(address))
    config = {"configurable": {"thread_id": "tally"}}
    graph.invoke({"log": [], "n": 0}, config)
    before = [state.metadata["step"] for state in graph.get_state_history(config)]

    graph.checkpointer.prune(["tally"], strategy="keep_latest")

    # Steps -1 to 10 were stored; the value was last stored whole at step 7 (its 8th update).
    assert before == list(range(10, -2, -1))
    assert [state.metadata["step"] for state in graph.get_state_history(config)] == [10, 9, 8, 7]
    assert graph.get_state(config).values["log"] == [f"step {n}" for n in range(10)]
    # The thread goes on from the kept checkpoint with nothing lost.
    assert graph.invoke(None, config)["log"] == [f"step {n}" for n in range(10)]
    assert graph.invoke({"log": []}, config)["log"] == [f"step {n}" for n in range(20)]


class _CountingTransport(httpx.HTTPTransport):
    """Counts the requests sent: each is a round trip a graph far from its server waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def test_a_delta_channel_reads_as_langgraphs_own_saver_rebuilds_it_in_a_few_requests(address: Address):
    """30 ancestors without a full value: every state is the in-memory saver's, read in a few requests."""
    transport = _CountingTransport()
    counted = Address.from_json(address.to_json(), http=HttpClient(transport=transport))
    cairn, memory = _tally_graph(CairnSaver(counted), 1000), _tally_graph(InMemorySaver(), 1000)
    config = {"configurable": {"thread_id": "long-tally"}}
    for graph in (cairn, memory):
        for start in ({"log": [], "n": 0}, {"log": []}, {"log": []}):  # ten steps each
            graph.invoke(start, config)

    sent = transport.sent
    state = cairn.get_state(config)
    requests = transport.sent - sent

    assert state.values == memory.get_state(config).values
    assert state.values["log"] == [f"step {n}" for n in range(30)]
    assert asyncio.run(cairn.aget_state(config)).values == state.values
    assert [s.values for s in cairn.get_state_history(config)] == [s.values for s in memory.get_state_history(config)]
    # The head, the checkpoint named, and its 30 ancestors in two pages; read one at a time, 37 requests.
    assert requests <= 4


FANNED_OUT = 100


class _Fanned(TypedDict):
    done: Annotated[list[int], operator.add]


class _Stopped(Exception):
    """The process running the graph ended here."""


class _StoppingAfterTheFanOutsWrites(httpx.HTTPTransport):
    """Sends requests until the planning task's writes (its `Send`s) begin to land, then stops, as a process
    killed there would: the first request of those writes is the last one sent."""

    def __init__(self) -> None:
        super().__init__()
        self.planned = threading.Event()
        self.stopped = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.stopped:
            raise _Stopped()
        answer = super().handle_request(request)
        if self.planned.is_set() and request.url.path.endswith("/writes"):
            self.stopped = True
        return answer


def _fan_out_graph(saver: BaseCheckpointSaver, planned: threading.Event | None = None):
    """A task that sends one work item to `work` for each of `FANNED_OUT` numbers (LangGraph's map step)."""

    def plan(state: _Fanned) -> dict:
        if planned is not None:
            planned.set()
        return {}

    builder = StateGraph(_Fanned)
    builder.add_node("plan", plan)
    builder.add_node("work", lambda n: {"done": [n]})
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", lambda _: [Send("work", n) for n in range(FANNED_OUT)], ["work"])
    builder.add_edge("work", END)
    return builder.compile(checkpointer=saver)


def test_a_fan_out_whose_process_stops_as_its_writes_land_resumes_with_every_work_item(address: Address):
    """LangGraph treats a task with any stored writes as finished and reapplies them: writes stored in part
    would resume the graph with some of its `Send`s silently gone. A task's writes land whole or not at all."""
    stopping = _StoppingAfterTheFanOutsWrites()
    stopped = Address.from_json(address.to_json(), http=HttpClient(transport=stopping))
    config = {"configurable": {"thread_id": "fan-out"}}
    with pytest.raises(_Stopped):
        _fan_out_graph(CairnSaver(stopped), stopping.planned).invoke({"done": []}, config)

    resumed = _fan_out_graph(CairnSaver(address)).invoke(None, config)

    assert sorted(resumed["done"]) == list(range(FANNED_OUT))


# -- hostile input -----------------------------------------------------------------


def _blob(data: bytes) -> dict:
    return {"type": "bytes", "data": base64.b64encode(data).decode()}


def _put(**override) -> dict:
    return {"thread_id": "t", "checkpoint_id": "c1", "checkpoint": _blob(b"x"), **override}


HOSTILE_PUTS = [
    pytest.param(_put(checkpoint_id="a#b"), 422, "invalid_request", id="id-with-hash"),
    pytest.param(_put(checkpoint_id=""), 422, "invalid_request", id="empty-id"),
    pytest.param(_put(parent_id="x" * 200), 422, "invalid_request", id="long-parent"),
    pytest.param(_put(thread_id="bad\u0000thread"), 422, "invalid_request", id="control-character"),
    pytest.param(_put(thread_id="t" * 600), 422, "invalid_request", id="long-thread"),
    pytest.param(_put(checkpoint={"type": "bytes", "data": "!!not base64!!"}), 422, "invalid_request", id="not-base64"),
    pytest.param(_put(checkpoint={"type": "bytes", "data": "abc"}), 400, "invalid_request", id="bad-padding"),
    pytest.param(_put(checkpoint={"type": "bytes"}), 422, "invalid_request", id="no-bytes"),
    pytest.param(_put(checkpoint=_blob(b"x" * 300_000)), 422, "invalid_request", id="inline-too-large"),
    pytest.param(_put(metadata={"note": "x" * 70_000}), 413, "payload_too_large", id="metadata-too-large"),
    pytest.param(
        _put(checkpoint={"type": "bytes", "parts": ["0" * 64], "size": 10}),
        409,
        "checkpoint_part_missing",
        id="no-part",
    ),
    pytest.param(
        _put(checkpoint={"type": "bytes", "parts": ["0" * 64], "size": 10**9}), 400, "invalid_request", id="size-off"
    ),
    pytest.param(
        _put(checkpoint={"type": "bytes", "parts": ["x" * 2000], "size": 10}), 422, "invalid_request", id="part-name"
    ),
    pytest.param(_put(surprise=1), 422, "invalid_request", id="unknown-field"),
]


@pytest.mark.parametrize(("body", "status", "code"), HOSTILE_PUTS)
def test_hostile_puts_are_refused_and_store_nothing(
    address: Address, served: ServeProcess, body: dict, status: int, code: str
):
    url = f"{address.address_url}/checkpoints"
    auth = {"Authorization": f"Bearer {address.read_token}"}

    with served.client() as http:
        answer = http.post(url, json=body, headers=auth, timeout=30)

    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert _stored(address) == []


def test_requests_without_the_read_token_are_refused_alike(address: Address, served: ServeProcess):
    url = f"{address.address_url}/checkpoints"
    other = f"{served.base_url}/api/v1/addresses/addr_{'0' * 24}/checkpoints"
    requests = [
        (method, target + path, body, headers)
        for target, headers in [
            (url, {}),
            (url, {"Authorization": "Bearer wrong"}),
            (other, {"Authorization": f"Bearer {address.read_token}"}),
        ]
        for method, path, body in [
            ("POST", "", _put()),
            ("POST", "/search", {"thread_id": "t"}),
            ("POST", "/writes", {"thread_id": "t", "checkpoint_id": "c1", "task_id": "k", "writes": []}),
            ("DELETE", "?thread_id=t", None),
            ("GET", f"/parts/{'0' * 64}?thread_id=t", None),
            ("POST", "/copy", {"source_thread_id": "t", "target_thread_id": "u"}),
            ("POST", "/prune", {"thread_ids": ["t"]}),
            ("POST", "/runs/delete", {"run_ids": ["r"]}),
        ]
    ]
    with served.client() as http:
        for method, target, body, headers in requests:
            answer = http.request(method, target, json=body, headers=headers, timeout=30)
            assert answer.status_code in (401, 422), (method, target, answer.text)
            assert answer.json()["error"]["code"] in ("unauthorized", "invalid_request")
    assert _stored(address) == []


def test_hostile_parts_writes_and_searches_get_json_errors(address: Address, served: ServeProcess):
    url = f"{address.address_url}/checkpoints"
    auth = {"Authorization": f"Bearer {address.read_token}"}
    data = b"part bytes"
    digest = hashlib.sha256(data).hexdigest()
    cases = [
        ("PUT", f"/parts/{'1' * 64}", {"thread_id": "t", "data": base64.b64encode(data).decode()}, 400),
        ("PUT", f"/parts/{digest}", {"thread_id": "t", "data": "a" * 3_000_000}, 422),
        ("PUT", "/parts/..%2F..", {"thread_id": "t", "data": ""}, 400),  # no part's digest is spelled so
        ("GET", f"/parts/{'x' * 3000}?thread_id=t", None, 404),
        ("GET", f"/parts/{digest}", None, 422),
        ("POST", "/writes", {"thread_id": "t", "checkpoint_id": "c1", "task_id": "k", "writes": []}, 422),
        (
            "POST",
            "/writes",
            {
                "thread_id": "t",
                "checkpoint_id": "c1",
                "task_id": "k",
                "writes": [{"idx": 0, "channel": "c", "value": _blob(b"v" * 60_000)}],
            },
            413,
        ),
        (
            "POST",
            "/writes",
            {
                "thread_id": "t",
                "checkpoint_id": "c1",
                "task_id": "k",
                "writes": [
                    {"idx": 0, "channel": "c", "value": _blob(b"1")},
                    {"idx": 0, "channel": "d", "value": _blob(b"2")},
                ],
            },
            400,
        ),
        ("POST", "/search", {"checkpoint_id": "c1"}, 400),
        ("POST", "/search", {"thread_id": "t", "after": "x" * 2000}, 422),
        ("POST", "/search", {"thread_id": "t", "limit": 0}, 422),
        ("POST", "/writes/search", {"thread_id": "t", "checkpoint_id": "c1", "after": "T#zz"}, 200),
        ("DELETE", "", None, 422),
    ]
    with served.client() as http:
        for method, path, body, status in cases:
            answer = http.request(method, url + path, json=body, headers=auth, timeout=60)
            assert answer.status_code == status, (method, path, answer.text[:300])
            if status >= 400:
                assert answer.json()["error"]["code"] in {"invalid_request", "payload_too_large", "not_found"}
        answer = http.post(url, content=b"{not json", headers={**auth, "Content-Type": "application/json"}, timeout=30)
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_json")
    assert _stored(address) == []


def _stored(address: Address) -> list:
    """Every checkpoint of every thread of the address."""
    return list(CairnSaver(address).list(None))
