"""DynamoDB calls per call of the agent-framework integrations, counted on the service's own client.

The integrations' own classes (`CairnSession` of the OpenAI Agents SDK,
LangGraph's `CairnSaver`, Strands' `CairnSessionRepository`) run unchanged;
their HTTP client hands each request to the resolver Lambda runs, in this
process (`bench.sdk`), so every DynamoDB call one SDK call costs is counted
as in `bench.calls`, with the HTTP requests it made.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Send
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from bench.calls import CairnProcess, status_text
from bench.report import Table
from bench.sdk import ResolverTransport, connect
from cairn.client.address import Address
from cairn.errors import CheckpointStale
from cairn.integrations.langgraph import CairnSaver
from cairn.integrations.openai_agents import CairnSession
from cairn.integrations.strands import CairnSessionRepository
from cairn.settings import Settings

# `get_items(limit=20)`, and an add of as many: a turn's worth of input items.
TURN_ITEMS = 20
QUESTION = "What changed in the build since yesterday?"
# A long conversation compacted: OpenAI's summary keeps its user messages.
COMPACTED_HISTORY = 300
COMPACTED_SUMMARY = 251
# A turn of 150 tool calls: each call and its output.
STAGED_ADD_ITEMS = 300
# An add of more items than one request holds (`MAX_ITEMS_PER_ADD`): two parts.
PARTED_ADD_ITEMS = 1500
# A LangGraph map step's `Send`s.
FANNED_OUT = 100
# As the SDKs hand them over: an OpenAI Agents input item, a Strands message (typed dicts on their side).
ITEM: Any = {"role": "user", "content": QUESTION}
MESSAGE: Any = {"role": "user", "content": [{"text": QUESTION}]}


def provisioned(process: CairnProcess) -> tuple[str, str]:
    """A new address's id and read token."""
    reply = process.provision()
    if reply.status != 201:
        raise RuntimeError(f"provisioning answered {reply.status}: {reply.body}")
    return reply.body["address"]["id"], reply.body["credentials"]["read_token"]


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    return {"configurable": configurable if checkpoint_id is None else {**configurable, "checkpoint_id": checkpoint_id}}


def checkpoint(step: int) -> Any:
    """A checkpoint as a graph's step makes one: its messages so far in one channel."""
    made = empty_checkpoint()
    made["channel_values"] = {"messages": [ITEM] * (step % 8 + 1)}
    made["channel_versions"] = {"messages": step + 1}
    return made


class Counting:
    """One process, its address as the SDKs hold it, and the table its rows go to."""

    def __init__(self, settings: Settings, repeats: int) -> None:
        self.process = CairnProcess(settings)
        self.address, self.transport = self._connect()
        self.repeats = repeats
        self.table = Table(
            "DynamoDB calls per integration call (the SDKs' classes, requests resolved in-process, DynamoDB Local)",
            ["call", "result", f"DynamoDB calls (mean of {repeats})", "HTTP requests", "transaction items"],
        )

    def _connect(self) -> tuple[Address, ResolverTransport]:
        return connect(self.process, *provisioned(self.process))

    def count(self, name: str, calls: list[Callable[[], str]]) -> None:
        self.process.counter.take()
        self.transport.take()
        outcomes = Counter(call() for call in calls)
        counts = self.process.counter.take(per=len(calls))
        requests = round(self.transport.take() / len(calls), 2)
        self.table.add(name, status_text(outcomes), counts, requests, counts.items_per_operation)


def measure_integration_calls(settings: Settings, repeats: int) -> Table:
    counting = Counting(settings, repeats)
    _session_rows(counting)
    _saver_rows(counting)
    _strands_rows(counting)
    counting.table.notes += [
        f"Each row makes one kind of call {repeats} times (on {repeats} sessions or threads where a call "
        "changes what the next meets); setting them up is not counted.",
        "HTTP requests: what the SDK's class sent per call; each is one request to the API function.",
        "Every session, checkpoint and message write commits in one transaction whose first condition is the "
        "address's token; the reads before it are the address (whose expiry the new items copy), with a "
        "session's head in the same batch for an add; a pop reads the head and the newest item in one query.",
    ]
    return counting.table


def _session_rows(counting: Counting) -> None:
    sessions = [CairnSession(counting.address, f"bench-{index}") for index in range(counting.repeats)]

    def add(session: CairnSession, items: int) -> str:
        asyncio.run(session.add_items([ITEM] * items))
        return "added"

    def get(session: CairnSession) -> str:
        return f"{len(asyncio.run(session.get_items(limit=TURN_ITEMS)))} items"

    def pop(session: CairnSession) -> str:
        return "popped" if asyncio.run(session.pop_item()) is not None else "empty"

    counting.count("CairnSession.add_items (first add, new session)", [partial(add, s, 1) for s in sessions])
    counting.count("CairnSession.add_items (1 item)", [partial(add, s, 1) for s in sessions])
    counting.count(f"CairnSession.add_items ({TURN_ITEMS} items)", [partial(add, s, TURN_ITEMS) for s in sessions])
    # A turn of many tool calls, added at once: more rows than one transaction holds, so the add is staged.
    counting.count(
        f"CairnSession.add_items ({STAGED_ADD_ITEMS} items, staged)",
        [partial(add, s, STAGED_ADD_ITEMS) for s in sessions],
    )
    # More items than one request holds: parts of one add, staged across their requests.
    counting.count(
        f"CairnSession.add_items ({PARTED_ADD_ITEMS} items, in parts)",
        [partial(add, s, PARTED_ADD_ITEMS) for s in sessions],
    )
    counting.count(f"CairnSession.get_items(limit={TURN_ITEMS})", [partial(get, s) for s in sessions])
    counting.count("CairnSession.pop_item", [partial(pop, s) for s in sessions])

    # The SDK's compaction of a long conversation: its summary keeps every user message, more rows than one
    # transaction holds, so the replacement is staged (written in parts, then one commit makes it the session).
    long_sessions = [CairnSession(counting.address, f"bench-long-{index}") for index in range(counting.repeats)]
    for session in long_sessions:
        add(session, COMPACTED_HISTORY)
    summary = [ITEM] * COMPACTED_SUMMARY

    def compact(session: CairnSession) -> str:
        return "replaced" if asyncio.run(session._atomic_replace_items(summary)) else "kept"

    counting.count(
        f"CairnSession compaction ({COMPACTED_HISTORY} items by {COMPACTED_SUMMARY}, staged)",
        [partial(compact, s) for s in long_sessions],
    )


class Thread:
    """One LangGraph thread as a graph's run writes it: read the head, then put each step after it."""

    def __init__(self, saver: CairnSaver, thread_id: str) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.head = thread_config(thread_id)
        self.before = self.head
        self.steps = 0

    def get_latest(self) -> str:
        return "none" if self.saver.get_tuple(thread_config(self.thread_id)) is None else "found"

    def get_head(self) -> str:
        return "found" if self.saver.get_tuple(self.head) is not None else "none"

    def put(self) -> str:
        self.before = self.head
        self.head = self.saver.put(self.head, checkpoint(self.steps), {"step": self.steps}, {})
        self.steps += 1
        return "stored"

    def put_stale(self) -> str:
        # As a second worker resuming from where the first one was: the head has moved on since.
        try:
            self.saver.put(self.before, checkpoint(self.steps), {"step": self.steps}, {})
        except CheckpointStale:
            return "CheckpointStale"
        return "stored"

    def put_writes(self) -> str:
        self.saver.put_writes(self.head, [("messages", ITEM), ("next", "tools")], f"task-{self.steps}")
        return "stored"

    def fan_out(self) -> str:
        # A map step: one `Send` a work item, more writes than one commit holds, so they travel as one.
        sends = [("__pregel_tasks", Send("work", index)) for index in range(FANNED_OUT)]
        self.saver.put_writes(self.head, sends, f"plan-{self.steps}")
        return "stored"


def _saver_rows(counting: Counting) -> None:
    saver = CairnSaver(counting.address)
    threads = [Thread(saver, f"bench-{index}") for index in range(counting.repeats)]
    # LangGraph reads a thread before its first put; the saver then asks for a thread still empty.
    counting.count("CairnSaver.get_tuple (new thread)", [thread.get_latest for thread in threads])
    counting.count("CairnSaver.put (first of a thread)", [thread.put for thread in threads])
    counting.count("CairnSaver.put (continuing the head)", [thread.put for thread in threads])
    counting.count("CairnSaver.put (stale parent, refused)", [thread.put_stale for thread in threads])
    counting.count("CairnSaver.put_writes (2 writes)", [thread.put_writes for thread in threads])
    counting.count(f"CairnSaver.put_writes ({FANNED_OUT} Sends, as one)", [thread.fan_out for thread in threads])
    counting.count("CairnSaver.get_tuple (latest)", [thread.get_latest for thread in threads])
    counting.count("CairnSaver.get_tuple (by checkpoint id)", [thread.get_head for thread in threads])


def _strands_rows(counting: Counting) -> None:
    repository = CairnSessionRepository(counting.address)
    repository.create_session(Session(session_id="bench", session_type=SessionType.AGENT))
    repository.create_agent("bench", SessionAgent(agent_id="agent", state={}, conversation_manager_state={}))

    def append(index: int) -> str:
        repository.create_message("bench", "agent", SessionMessage(message=MESSAGE, message_id=index))
        return "stored"

    append(0)  # the run's first write takes its hold on the agent
    counting.count(
        "CairnSessionRepository.create_message (appending)",
        [partial(append, index) for index in range(1, counting.repeats + 1)],
    )
