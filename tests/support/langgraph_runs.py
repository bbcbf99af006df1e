"""What the LangGraph tests run in processes of their own: racing writers and a graph that waits for a human.

Importable by module name, so `multiprocessing`'s spawn and `python -m` can
start it afresh, as a new Lambda invocation or job would.
"""

from __future__ import annotations

import json
import operator
import sys
from multiprocessing.synchronize import Barrier
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from cairn.integrations.langgraph import CairnSaver, CairnStore, CheckpointStale, StoreVersionConflict


def race(
    base_url: str, address_id: str, token: str, thread_id: str, rounds: int, barrier: Barrier, results: Any
) -> None:
    """Each round: read the thread's head together with the other worker, then both put a child of it."""
    saver = CairnSaver.connect(base_url, address_id, token)
    won = refused = 0
    for step in range(rounds):
        barrier.wait()
        head = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        assert head is not None
        barrier.wait()  # both hold the same head before either writes
        try:
            saver.put(head.config, generate_checkpoint(), generate_metadata(step=step + 1), {})
            won += 1
        except CheckpointStale:
            refused += 1
        barrier.wait()
    results.put((won, refused))


def store_race(base_url: str, address_id: str, token: str, rounds: int, barrier: Barrier, results: Any) -> None:
    """Each round: read one store item together with the other worker, then both put it under the version read."""
    store = CairnStore.connect(base_url, address_id, token)
    won = refused = 0
    for _ in range(rounds):
        barrier.wait()
        item, version = store.get_versioned(("race",), "counter")
        assert item is not None
        barrier.wait()  # both hold the same version before either writes
        try:
            store.put_if_version(("race",), "counter", {"n": item.value["n"] + 1}, expected_version=version)
            won += 1
        except StoreVersionConflict:
            refused += 1
        barrier.wait()
    results.put((won, refused))


class Review(TypedDict):
    steps: Annotated[list[str], operator.add]
    approved: str


def plan(state: Review) -> dict[str, Any]:
    # A scripted step where a model would answer: no network, the same every run.
    return {"steps": ["drafted a plan"]}


def ask(state: Review) -> dict[str, Any]:
    answer = interrupt({"question": "Approve the plan?", "steps": state["steps"]})
    return {"approved": answer, "steps": [f"asked, answer {answer}"]}


def finish(state: Review) -> dict[str, Any]:
    return {"steps": ["done" if state["approved"] == "yes" else "dropped"]}


def review_graph(saver: CairnSaver):
    builder = StateGraph(Review)
    builder.add_node("plan", plan)
    builder.add_node("ask", ask)
    builder.add_node("finish", finish)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "ask")
    builder.add_edge("ask", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=saver)


def main(argv: list[str]) -> None:
    """`start` runs the graph until it waits for a human; `resume <answer>` finishes it. Prints JSON."""
    command, base_url, address_id, token, thread_id, *rest = argv
    graph = review_graph(CairnSaver.connect(base_url, address_id, token))
    config = {"configurable": {"thread_id": thread_id}}
    if command == "start":
        result = graph.invoke({"steps": [], "approved": ""}, config)
        print(json.dumps({"steps": result["steps"], "waiting_for": [i.value for i in result["__interrupt__"]]}))
    else:
        result = graph.invoke(Command(resume=rest[0]), config)
        state = graph.get_state(config)
        print(json.dumps({"steps": result["steps"], "approved": result["approved"], "next": list(state.next)}))


if __name__ == "__main__":
    main(sys.argv[1:])
