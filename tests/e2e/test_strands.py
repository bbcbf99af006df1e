"""`CairnSessionManager`, Strands' session on Cairn, against `cairn serve` over real HTTP.

A real Strands `Agent` on a scripted model (no network): its session
survives a new process; two runs that overlap on one session, one refused
and nothing of it stored; the conversation manager's window restored from
an offset; large, binary content round-tripping exactly; and a `Graph`'s
state kept between runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.multiagent import GraphBuilder

from cairn.client import Address
from cairn.integrations.strands import CairnSessionManager, CairnSessionRepository
from tests.support import strands_runs
from tests.support.processes import process_context
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="strands", expires_in=3600) as created:
        yield created


def run_in_new_process(served: ServeProcess, address: Address, session_id: str, message: str) -> dict[str, Any]:
    argv = ["turn", served.base_url, address.id, address.read_token, session_id, message]
    command = [sys.executable, "-m", "tests.support.strands_runs", *argv]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stored(address: Address, session_id: str) -> list[tuple[int, str, str]]:
    """The agent's stored messages as (index, role, text), read afresh."""
    messages = CairnSessionRepository(address).list_messages(session_id, "default")
    return [(m.message_id, m.message["role"], m.message["content"][0]["text"]) for m in messages]


def test_a_second_run_in_a_new_process_continues_the_conversation(address: Address, served: ServeProcess):
    first = run_in_new_process(served, address, "chat-1", "My name is Ada.")
    second = run_in_new_process(served, address, "chat-1", "What is my name?")

    assert first == {"answer": "heard: My name is Ada."}
    assert second == {"answer": "heard: My name is Ada. | What is my name?"}
    assert stored(address, "chat-1") == [
        (0, "user", "My name is Ada."),
        (1, "assistant", "heard: My name is Ada."),
        (2, "user", "What is my name?"),
        (3, "assistant", "heard: My name is Ada. | What is my name?"),
    ]


def test_a_run_that_starts_while_another_is_running_is_refused_and_stores_nothing(
    address: Address, served: ServeProcess
):
    assert run_in_new_process(served, address, "busy", "first turn") == {"answer": "heard: first turn"}
    context = process_context()
    entered, proceed, results = context.Event(), context.Event(), context.Queue()
    running = context.Process(
        target=strands_runs.held_turn,
        args=(served.base_url, address.id, address.read_token, "busy", "A speaks", entered, proceed, results),
    )
    running.start()
    try:
        assert entered.wait(timeout=120), "the first run never reached its model"
        # The first run stored its prompt and waits on its model: a retry of the same job starts now.
        overlapping = run_in_new_process(served, address, "busy", "B speaks")
    finally:
        proceed.set()
    finished = results.get(timeout=120)
    running.join(timeout=60)

    assert overlapping == {"refused": "held"}
    assert finished == {"answer": "heard: first turn | A speaks"}
    assert stored(address, "busy") == [
        (0, "user", "first turn"),
        (1, "assistant", "heard: first turn"),
        (2, "user", "A speaks"),
        (3, "assistant", "heard: first turn | A speaks"),
    ]
    # Once the first run ended, the session is free for the next one, which sees all of it.
    after = run_in_new_process(served, address, "busy", "B again")
    assert after == {"answer": "heard: first turn | A speaks | B again"}


def race(served: ServeProcess, address: Address, session_id: str, round_: int) -> list:
    """Runs A and B of one session in two new processes, loaded before either goes on; their outcomes."""
    context = process_context()
    barrier, results = context.Barrier(2), context.Queue()
    runs = [
        context.Process(
            target=strands_runs.racing_turn,
            args=(
                served.base_url,
                address.id,
                address.read_token,
                session_id,
                f"{who}{round_}",
                barrier,
                results,
            ),
        )
        for who in ("A", "B")
    ]
    for run in runs:
        run.start()
    outcomes = [results.get(timeout=120) for _ in runs]
    for run in runs:
        run.join(timeout=60)
        assert run.exitcode == 0
    return outcomes


def assert_one_winner_each_and_only_winners_stored(
    address: Address, session_id: str, outcomes: list, before: list[dict] | None = None
) -> None:
    """Each race had one answer and one refusal; the session holds `before`'s turns then the winners', only."""
    assert [sorted("answer" in o for o in pair) for pair in outcomes] == [[False, True]] * len(outcomes)
    assert all(o["refused"] in ("moved", "held", "exists") for pair in outcomes for o in pair if "refused" in o)
    turns = [*(before or []), *(next(o for o in pair if "answer" in o) for pair in outcomes)]
    messages = stored(address, session_id)
    # Two messages a turn, in order, indexes 0.. with none twice and none missing.
    assert [index for index, _, _ in messages] == list(range(2 * len(turns)))
    assert [text for _, role, text in messages if role == "user"] == [turn["message"] for turn in turns]
    assert [text for _, role, text in messages if role == "assistant"] == [turn["answer"] for turn in turns]
    assert [text for text, seen in Counter(text for _, _, text in messages).items() if seen > 1] == []


def test_of_two_runs_loaded_from_the_same_state_one_commits_and_the_other_is_refused(
    address: Address, served: ServeProcess
):
    first = strands_runs.agent(served.base_url, address.id, address.read_token, "raced")
    before = [{"message": "R", "answer": str(first("R")).strip()}]

    outcomes = [race(served, address, "raced", round_) for round_ in range(3)]

    assert_one_winner_each_and_only_winners_stored(address, "raced", outcomes, before)


def test_two_first_runs_of_a_new_session_at_once_make_one_conversation(address: Address, served: ServeProcess):
    outcomes = [race(served, address, "new", 0)]

    assert_one_winner_each_and_only_winners_stored(address, "new", outcomes)


def test_a_sliding_window_is_restored_from_its_offset(address: Address, served: ServeProcess):
    def windowed() -> Agent:
        manager = CairnSessionManager.connect(served.base_url, address.id, address.read_token, "window")
        window = SlidingWindowConversationManager(window_size=4, should_truncate_results=False)
        return Agent(
            model=strands_runs.EchoingModel(),
            session_manager=manager,
            conversation_manager=window,
            callback_handler=None,
        )

    for text in ("one", "two", "three"):
        windowed()(text)
    restored = windowed()

    # Every message stays stored; the restored agent reads only the window's, from the offset it saved.
    texts = [text for _, _, text in stored(address, "window")]
    assert len(texts) == 6
    assert [m["content"][0]["text"] for m in restored.messages] == texts[2:]


def test_large_and_binary_content_round_trips_exactly(address: Address, served: ServeProcess):
    manager = CairnSessionManager.connect(served.base_url, address.id, address.read_token, "large")
    picture = os.urandom(900_000)
    history = [
        {"role": "user", "content": [{"text": "look"}, {"image": {"format": "png", "source": {"bytes": picture}}}]},
        {"role": "assistant", "content": [{"text": "Überblick: 日本語, emoji 🎉 " + "x" * 1_000_000}]},
    ]
    # What the agent keeps beside its messages (`agent.state`) may be larger than one DynamoDB item too.
    notes = {"draft": "Entwurf " * 200_000, "sources": [f"https://example.com/{index}" for index in range(1000)]}
    Agent(
        model=strands_runs.EchoingModel(),
        messages=history,
        state=notes,
        session_manager=manager,
        callback_handler=None,
    )

    restored = Agent(
        model=strands_runs.EchoingModel(),
        session_manager=CairnSessionManager.connect(served.base_url, address.id, address.read_token, "large"),
        callback_handler=None,
    )

    assert restored.messages == history
    assert restored.state.get() == notes


def test_a_graphs_state_is_kept_and_each_run_goes_on_from_the_version_stored(address: Address, served: ServeProcess):
    def graph_run(task: str) -> str:
        builder = GraphBuilder()
        builder.add_node(Agent(model=strands_runs.EchoingModel(), callback_handler=None), "echo")
        builder.set_max_node_executions(1)
        builder.set_session_manager(
            CairnSessionManager.connect(served.base_url, address.id, address.read_token, "graph")
        )
        result = builder.build()(task)
        return str(result.results["echo"].result).strip()

    # The graph's state holds its task and each node's result: a long document makes it larger than one item.
    document = "Kapitel " * 100_000
    first, second = graph_run("first task"), graph_run(document)

    state = CairnSessionRepository(address).read_multi_agent("graph", "default_graph")
    assert (first, second) == ("heard: first task", f"heard: {document}".strip())
    assert state is not None and state["status"] == "completed"
    assert state["current_task"] == document and state["execution_order"] == ["echo"]
