"""`CairnSession`, the OpenAI Agents SDK's session on Cairn, against `cairn serve` over real HTTP.

What the SDK's own tests check of `SQLiteSession` (it ships no reusable
session suite), ported to `CairnSession`; processes adding and popping on
one session at once; an agent whose second run in a new process continues
the first one's conversation; large items; and hostile requests to the
session routes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent, FunctionTool, Runner, SessionSettings, set_tracing_disabled
from agents.extensions.memory import EncryptedSession
from agents.memory import OpenAIResponsesCompactionSession
from cryptography.fernet import Fernet
from openai import AsyncOpenAI

from cairn.client import Address
from cairn.integrations.openai_agents import CairnSession
from tests.support import openai_agents_runs
from tests.support.processes import process_context
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="openai-agents", expires_in=3600) as created:
        yield created


def contents(items: list) -> list:
    return [item["content"] for item in items]


# -- the SDK's session behaviours ------------------------------------------------


def test_items_come_back_in_order_and_clearing_empties_the_session(address: Address):
    session = CairnSession(address, "direct")

    async def scenario():
        await session.add_items([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}])
        retrieved = await session.get_items()
        await session.clear_session()
        return retrieved, await session.get_items()

    retrieved, after_clear = asyncio.run(scenario())

    assert retrieved == [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}]
    assert after_clear == []


def test_a_session_id_with_reserved_characters_is_one_session(address: Address):
    """Apps name sessions `user:42` or `a@b`; the id travels percent-encoded and names the same session."""
    named = CairnSession(address, "user:42@chat+1")

    async def scenario():
        await named.add_items([{"role": "user", "content": "Hello"}])
        return await CairnSession(address, "user:42@chat+1").get_items(), await CairnSession(
            address, "user"
        ).get_items()

    same, other = asyncio.run(scenario())
    assert contents(same) == ["Hello"]
    assert other == []


def test_pop_takes_the_newest_item_until_the_session_is_empty(address: Address):
    session = CairnSession(address, "pop")

    async def scenario():
        first = await session.pop_item()
        await session.add_items(
            [
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi there!"},
                {"role": "user", "content": "How are you?"},
            ]
        )
        popped = [await session.pop_item() for _ in range(4)]
        return first, popped, await session.get_items()

    first, popped, left = asyncio.run(scenario())

    assert first is None
    assert [item and item["content"] for item in popped] == ["How are you?", "Hi there!", "Hello", None]
    assert left == []


def test_pop_and_items_touch_only_their_own_session(address: Address):
    one, two = CairnSession(address, "session_1"), CairnSession(address, "session_2")

    async def scenario():
        await one.add_items([{"role": "user", "content": "Session 1 message"}])
        await two.add_items(
            [{"role": "user", "content": "Session 2 message 1"}, {"role": "user", "content": "Session 2 message 2"}]
        )
        popped = await two.pop_item()
        return popped, await one.get_items(), await two.get_items()

    popped, first, second = asyncio.run(scenario())

    assert popped == {"role": "user", "content": "Session 2 message 2"}
    assert contents(first) == ["Session 1 message"]
    assert contents(second) == ["Session 2 message 1"]


def test_a_limit_returns_the_latest_items_oldest_first(address: Address):
    session = CairnSession(address, "limit")
    said = ["Message 1", "Response 1", "Message 2", "Response 2", "Message 3", "Response 3"]

    async def scenario():
        await session.add_items([{"role": "user", "content": text} for text in said])
        return {limit: contents(await session.get_items(limit=limit)) for limit in (None, 2, 4, 10, 0)}

    found = asyncio.run(scenario())

    assert found == {None: said, 2: said[4:], 4: said[2:], 10: said, 0: []}


def test_the_session_settings_limit_applies_when_no_limit_is_given(address: Address):
    session = CairnSession(address, "settings", session_settings=SessionSettings(limit=2))

    async def scenario():
        await session.add_items([{"role": "user", "content": str(n)} for n in range(5)])
        return await session.get_items(), await session.get_items(limit=3)

    default, explicit = asyncio.run(scenario())

    assert contents(default) == ["3", "4"] and contents(explicit) == ["2", "3", "4"]


def test_runs_remember_their_own_session_and_no_other(address: Address):
    set_tracing_disabled(True)
    agent = openai_agents_runs.agent()
    cats, dogs = CairnSession(address, "cats"), CairnSession(address, "dogs")

    async def scenario():
        await Runner.run(agent, "I like cats", session=cats)
        await Runner.run(agent, "I like dogs", session=dogs)
        return await Runner.run(agent, "What did I say I like?", session=cats)

    result = asyncio.run(scenario())

    assert result.final_output == "heard: I like cats | What did I say I like?"
    assert len(asyncio.run(cats.get_items())) == 4


def test_items_of_any_size_the_sdk_makes_round_trip_exactly(address: Address):
    session = CairnSession(address, "large")
    tool_output = os.urandom(1_200_000).hex()  # 2.4 MB of text: pieces at rest, one item on the wire
    items = [
        {"type": "function_call", "call_id": "call_1", "name": "fetch", "arguments": '{"url": "x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": tool_output},
        {"role": "assistant", "content": "Überblick: 日本語, emoji 🎉, \u0000-free and \\ kept", "n": 1.5e-7},
    ]

    async def scenario():
        await session.add_items(items)
        return await session.get_items(), await session.get_items(limit=2), await session.pop_item()

    everything, latest, popped = asyncio.run(scenario())

    assert everything == items
    assert latest == items[1:]
    assert popped == items[2]
    assert asyncio.run(session.get_items()) == items[:2]


# -- many processes on one session ------------------------------------------------


def test_processes_adding_and_popping_at_once_lose_nothing_and_pop_nothing_twice(
    address: Address, served: ServeProcess
):
    workers, rounds = 4, 12
    context = process_context()
    barrier, results = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(
            target=openai_agents_runs.churn,
            args=(served.base_url, address.id, address.read_token, "shared", worker, rounds, barrier, results),
        )
        for worker in range(workers)
    ]
    for process in processes:
        process.start()
    popped = [text for _ in processes for text in results.get(timeout=240)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    left = contents(asyncio.run(CairnSession(address, "shared").get_items()))
    added = [f"{worker}-{step}-{part}" for worker in range(workers) for step in range(rounds) for part in "ab"]
    assert len(popped) == workers * rounds  # every pop found an item: each followed its own add
    assert [text for text, seen in Counter(popped + left).items() if seen > 1] == []  # none popped twice
    assert sorted(popped + left) == sorted(added)  # none lost
    # An add lands whole: where both items of one add are left, nothing came between them.
    for index, text in enumerate(left):
        if text.endswith("-a") and text[:-1] + "b" in left:
            assert left[index + 1] == text[:-1] + "b"


def test_adds_larger_than_one_request_from_several_processes_at_once_each_land_whole_and_unbroken(
    address: Address, served: ServeProcess
):
    """Three processes each add a turn of 40 items of 100 KB (more than one request holds: parts of one add)
    while two others add a pair of items: every item is stored once, and each turn's items stand together in
    order, with nothing of another add between them."""
    context = process_context()
    turns = {
        worker: [{"role": "tool", "content": f"{worker}-{index}-" + "x" * 100_000} for index in range(40)]
        for worker in "abc"
    }
    pairs = {worker: [{"role": "user", "content": f"{worker}-{index}"} for index in range(2)] for worker in "de"}
    processes = [
        context.Process(
            target=openai_agents_runs.add, args=(served.base_url, address.id, address.read_token, "busy", items)
        )
        for items in [*turns.values(), *pairs.values()]
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
        assert process.exitcode == 0

    stored = contents(asyncio.run(CairnSession(address, "busy").get_items()))
    added = contents([item for items in [*turns.values(), *pairs.values()] for item in items])
    assert sorted(stored) == sorted(added)  # each once, none lost
    for items in [*turns.values(), *pairs.values()]:
        first = stored.index(items[0]["content"])
        assert stored[first : first + len(items)] == contents(items)


# -- an agent that goes on in another process ---------------------------------------


def test_a_second_run_in_a_new_process_continues_the_conversation(address: Address, served: ServeProcess):
    def run(message: str) -> str:
        argv = ["turn", served.base_url, address.id, address.read_token, "chat-1", message]
        command = [sys.executable, "-m", "tests.support.openai_agents_runs", *argv]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert run("My name is Ada.") == "heard: My name is Ada."

    assert run("What is my name?") == "heard: My name is Ada. | What is my name?"
    stored = asyncio.run(CairnSession(address, "chat-1").get_items())
    assert [item.get("role") for item in stored] == ["user", "assistant", "user", "assistant"]


def test_a_run_handed_a_long_conversation_keeps_all_of_it(address: Address):
    """A run's input may be a whole conversation carried over from elsewhere: more items than one add
    holds. The run saves it all, in order, and the next run is handed it."""
    set_tracing_disabled(True)
    carried = [{"role": "user", "content": f"earlier {index}"} for index in range(100)]

    asyncio.run(Runner.run(openai_agents_runs.agent(), carried, session=CairnSession(address, "carried")))
    second = asyncio.run(Runner.run(openai_agents_runs.agent(), "And now?", session=CairnSession(address, "carried")))

    stored = asyncio.run(CairnSession(address, "carried").get_items())
    assert stored[:100] == carried
    assert [item.get("role") for item in stored[100:]] == ["assistant", "user", "assistant"]
    assert str(second.final_output).endswith("earlier 99 | And now?")


# -- the SDK's compaction ---------------------------------------------------------------


class CompactionEndpoint:
    """The Responses API's `compact` as the SDK calls it, with no network: it answers the user messages it
    was sent and one compaction item summing up how many items it was sent. `meanwhile` runs while it
    answers, after the SDK read the history and before it writes the summary back."""

    def __init__(self, meanwhile: Callable[[], None] | None = None) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self._meanwhile = meanwhile

    def client(self) -> AsyncOpenAI:
        transport = httpx.MockTransport(self._answer)
        return AsyncOpenAI(
            api_key="unused",
            base_url="https://api.openai.invalid/v1",
            http_client=httpx.AsyncClient(transport=transport),
        )

    def _answer(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/responses/compact"
        sent = json.loads(request.content)["input"]
        self.inputs.append(sent)
        if self._meanwhile:
            self._meanwhile()
        summary = {"type": "compaction", "id": f"cmp_{len(self.inputs)}", "encrypted_content": f"{len(sent)} items"}
        users = [item for item in sent if item.get("role") == "user"]
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}  # fmt: skip
        answer = {"id": "resp_compacted", "created_at": 0, "object": "response.compaction",
                  "output": [*users, summary], "usage": usage}  # fmt: skip
        return httpx.Response(200, json=answer)


def compacting(address: Address, session_id: str, endpoint: CompactionEndpoint) -> OpenAIResponsesCompactionSession:
    """The SDK's compacting session on a `CairnSession`, compacting after every run."""
    return OpenAIResponsesCompactionSession(
        session_id,
        CairnSession(address, session_id),
        client=endpoint.client(),
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )


def test_the_sdks_compaction_after_a_run_leaves_its_summary_and_the_conversation_goes_on(address: Address):
    set_tracing_disabled(True)
    endpoint = CompactionEndpoint()
    agent = Agent(name="assistant", instructions="Answer briefly.", model=openai_agents_runs.StoringModel())

    first = asyncio.run(Runner.run(agent, "My name is Ada.", session=compacting(address, "compacted", endpoint)))

    assert first.final_output == "heard: My name is Ada."
    assert [[item.get("role") for item in sent] for sent in endpoint.inputs] == [["user", "assistant"]]
    stored = asyncio.run(CairnSession(address, "compacted").get_items())
    assert stored == [
        {"role": "user", "content": "My name is Ada."},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "2 items"},
    ]
    # A later run, in a session object of its own, starts from the summary.
    second = asyncio.run(Runner.run(agent, "What is my name?", session=compacting(address, "compacted", endpoint)))
    assert second.final_output == "heard: My name is Ada. | What is my name?"


LATE = {"role": "user", "content": "added by another worker"}


def another_worker_adding(served: ServeProcess, address: Address, session_id: str, item: dict) -> Callable[[], None]:
    """What another worker does while the SDK compacts: add `item` to the session, from a process of its own."""

    def add() -> None:
        worker = process_context().Process(
            target=openai_agents_runs.add,
            args=(served.base_url, address.id, address.read_token, session_id, [item]),
        )
        worker.start()
        worker.join(timeout=60)
        assert worker.exitcode == 0

    return add


def test_an_add_another_process_makes_while_the_sdk_compacts_is_kept(address: Address, served: ServeProcess):
    """The SDK reads the history, asks for its summary, then writes it back: a worker's add in between must
    not be cleared away with what was summed up (with no hook, the SDK clears the session, then adds)."""
    set_tracing_disabled(True)
    endpoint = CompactionEndpoint(meanwhile=another_worker_adding(served, address, "shared-compaction", LATE))
    agent = Agent(name="assistant", instructions="Answer briefly.", model=openai_agents_runs.StoringModel())

    asyncio.run(Runner.run(agent, "Remember 42.", session=compacting(address, "shared-compaction", endpoint)))

    assert len(endpoint.inputs) == 1  # the compaction ran, and its summary was refused as stale
    stored = asyncio.run(CairnSession(address, "shared-compaction").get_items())
    # The history as it was, the other worker's add after it; no summary in place of either.
    assert [item.get("role") for item in stored] == ["user", "assistant", "user"], stored
    assert stored[-1] == LATE


def test_the_sdks_compaction_after_a_run_of_many_tool_calls_replaces_that_run_and_keeps_what_came_before(
    address: Address,
):
    """A run calling a tool 60 times makes 122 items, more than one commit could delete: the SDK's compaction
    after it puts its summary in their place all the same, and the history the run was not handed stays."""
    set_tracing_disabled(True)
    endpoint = CompactionEndpoint()
    earlier = [{"role": "user", "content": f"earlier {index}"} for index in range(5)]
    asyncio.run(CairnSession(address, "tools").add_items(earlier))
    agent = Agent(
        name="worker",
        instructions="Do every step.",
        model=openai_agents_runs.ToolCallingModel(calls=60),
        tools=[openai_agents_runs.step],
    )
    # The run is handed the newest history item only: the older ones are not the run's to sum up.
    session = OpenAIResponsesCompactionSession(
        "tools",
        CairnSession(address, "tools", session_settings=SessionSettings(limit=1)),
        client=endpoint.client(),
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )

    result = asyncio.run(Runner.run(agent, "Do the steps.", session=session))

    assert result.final_output == "done 60 steps"
    # Summed up once: the run's 122 items and the history item it was handed, 123 of the session's 127.
    assert [len(sent) for sent in endpoint.inputs] == [123]
    stored = asyncio.run(CairnSession(address, "tools").get_items())
    assert stored == [
        *earlier,
        {"role": "user", "content": "Do the steps."},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "123 items"},
    ]


@contextmanager
def reading_all_the_while(reader: Callable[..., None], *arguments: Any, processes: int = 3) -> Iterator[list[Any]]:
    """`processes` processes each running `reader(*arguments, done, results)` while the block runs; once it
    ends, the list it was given holds what each reported."""
    context = process_context()
    done, results = context.Event(), context.Queue()
    readers = [context.Process(target=reader, args=(*arguments, done, results)) for _ in range(processes)]
    for each in readers:
        each.start()
    reports: list[Any] = []
    try:
        yield reports
    finally:
        done.set()
    reports += [results.get(timeout=120) for _ in readers]
    for each in readers:
        each.join(timeout=60)
        assert each.exitcode == 0


@pytest.mark.parametrize(
    ("calls", "tool", "at_least_bytes"),
    [(150, openai_agents_runs.step, 0), (70, openai_agents_runs.read_page, 4_000_000)],
    ids=["more-rows-than-a-transaction", "more-bytes-than-a-request"],
)
def test_a_run_of_many_tool_calls_is_stored_whole_while_other_processes_read(
    address: Address, served: ServeProcess, calls: int, tool: FunctionTool, at_least_bytes: int
):
    """The SDK adds a turn's calls and their outputs at once. 150 calls make 300 items, more rows than one
    DynamoDB transaction holds; 70 calls each answering a page of 60 KB make 4 MB, more than one request holds,
    which go as parts of one add. Processes reading the session all the while never see a call without its
    output, a history the model's API refuses."""
    set_tracing_disabled(True)
    agent = Agent(
        name="worker",
        instructions="Do every step.",
        model=openai_agents_runs.ToolCallingModel(calls=calls, tool=tool.name),
        tools=[tool],
    )
    where = (served.base_url, address.id, address.read_token, "steps")

    with reading_all_the_while(openai_agents_runs.read_tool_calls_while, *where) as reads:
        result = asyncio.run(Runner.run(agent, "Do the steps.", session=CairnSession(address, "steps")))

    assert result.final_output == f"done {calls} steps"
    stored = asyncio.run(CairnSession(address, "steps").get_items())
    assert Counter(item.get("type", "message") for item in stored) == {
        "message": 2,
        "function_call": calls,
        "function_call_output": calls,
    }
    assert len(json.dumps(stored)) > at_least_bytes
    assert reads == [(0, len(stored))] * 3  # none saw part of the turn, and each read on past its end


ENCRYPTION_KEY = Fernet.generate_key().decode("ascii")


def encrypted_compacting(
    address: Address, session_id: str, endpoint: CompactionEndpoint
) -> tuple[OpenAIResponsesCompactionSession, EncryptedSession]:
    """The SDK's compacting session over its encrypting one over a `CairnSession`, compacting after every run."""
    encrypted = EncryptedSession(session_id, CairnSession(address, session_id), encryption_key=ENCRYPTION_KEY)
    compacting_session = OpenAIResponsesCompactionSession(
        session_id,
        encrypted,
        client=endpoint.client(),
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )
    return compacting_session, encrypted


def test_an_add_another_process_makes_while_the_sdk_compacts_an_encrypted_session_is_kept(
    address: Address, served: ServeProcess
):
    """Under the SDK's encrypting session too, the summary goes in one commit only while the session is as
    read: the SDK would otherwise clear it and add the summary, and the other worker's add would go."""
    set_tracing_disabled(True)
    endpoint = CompactionEndpoint(meanwhile=another_worker_adding(served, address, "encrypted", LATE))
    session, _ = encrypted_compacting(address, "encrypted", endpoint)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=openai_agents_runs.StoringModel())

    asyncio.run(Runner.run(agent, "Remember 42.", session=session))

    assert len(endpoint.inputs) == 1  # the compaction ran, and its summary was refused as stale
    stored = asyncio.run(CairnSession(address, "encrypted").get_items())
    # The run's two items as they were, encrypted, and the other worker's add after them.
    assert [item.get("__enc__") for item in stored[:2]] == [1, 1]
    assert stored[2:] == [LATE]


def test_the_sdks_compaction_of_an_encrypted_session_removes_the_items_past_their_time(address: Address):
    """As the SDK's own stores do, the commit that puts the summary in place also removes the oldest items
    whose encryption is past the session's time to live, which no read returns any more."""
    set_tracing_disabled(True)
    endpoint = CompactionEndpoint()
    session, encrypted = encrypted_compacting(address, "expiring", endpoint)
    an_hour_ago = int(time.time()) - 3600
    expired = [
        {
            **encrypted._wrap(item),
            "payload": encrypted.cipher.encrypt_at_time(json.dumps(item).encode(), an_hour_ago).decode(),
        }
        for item in [{"role": "user", "content": f"long ago {index}"} for index in range(3)]
    ]
    asyncio.run(CairnSession(address, "expiring").add_items(expired))
    agent = Agent(name="assistant", instructions="Answer briefly.", model=openai_agents_runs.StoringModel())

    first = asyncio.run(Runner.run(agent, "Hello.", session=session))

    assert first.final_output == "heard: Hello."  # the expired items were not handed to the model
    assert len(asyncio.run(CairnSession(address, "expiring").get_items())) == 2  # none of the expired is left
    assert asyncio.run(encrypted.get_items()) == [
        {"role": "user", "content": "Hello."},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "2 items"},
    ]


def test_a_manual_compaction_replaces_the_whole_history_in_one_commit(address: Address):
    """70 user messages: the summary keeps each, so it is more than one add holds, and still one commit."""
    endpoint = CompactionEndpoint()
    session = compacting(address, "manual", endpoint)
    history = [{"role": "user", "content": f"m{index}"} for index in range(70)]

    async def scenario() -> list:
        await session.add_items(history)
        await session.run_compaction({"force": True})
        return await CairnSession(address, "manual").get_items()

    stored = asyncio.run(scenario())

    assert stored == [*history, {"type": "compaction", "id": "cmp_1", "encrypted_content": "70 items"}]


def test_a_compaction_keeping_more_user_messages_than_one_commit_holds_replaces_the_history_at_once(
    address: Address, served: ServeProcess
):
    """300 user messages: OpenAI's summary keeps each, more than one DynamoDB transaction holds, so Cairn writes
    it in several before one commit makes it the session. Processes reading all the while see the history or
    the summary, never some of each."""
    endpoint = CompactionEndpoint()
    history = [{"role": "user", "content": f"message {index}"} for index in range(300)]
    summary = [*history, {"type": "compaction", "id": "cmp_1", "encrypted_content": "300 items"}]
    asyncio.run(CairnSession(address, "long").add_items(history))
    known = {"history": history, "summary": summary}
    where = (served.base_url, address.id, address.read_token, "long", known)

    with reading_all_the_while(openai_agents_runs.read_while, *where) as reads:
        asyncio.run(compacting(address, "long", endpoint).run_compaction({"force": True}))

    assert asyncio.run(CairnSession(address, "long").get_items()) == summary
    assert [others for _, others in reads] == [[], [], []]
    assert all(seen["summary"] >= 1 for seen, _ in reads)  # each reader read on past the commit


# -- hostile input ---------------------------------------------------------------------


def items_url(address: Address, session_id: str = "s") -> str:
    return f"{address.address_url}/sessions/{session_id}/items"


HOSTILE_ADDS = [
    pytest.param({"items": []}, 422, "invalid_request", id="no-items"),
    pytest.param({"items": [1, 2]}, 422, "invalid_request", id="not-objects"),
    pytest.param({"items": "x"}, 422, "invalid_request", id="not-a-list"),
    pytest.param({}, 422, "invalid_request", id="missing"),
    pytest.param({"items": [{"n": 1}], "surprise": 1}, 422, "invalid_request", id="unknown-field"),
    pytest.param({"items": [{"n": n} for n in range(1001)]}, 422, "invalid_request", id="too-many"),
    pytest.param({"items": [{"t": "x" * 1_800_000}, {"t": "y" * 1_800_000}]}, 413, "payload_too_large", id="too-big"),
]


@pytest.mark.parametrize(("body", "status", "code"), HOSTILE_ADDS)
def test_hostile_adds_are_refused_and_store_nothing(
    address: Address, served: ServeProcess, body: dict, status: int, code: str
):
    auth = {"Authorization": f"Bearer {address.read_token}"}

    with served.client() as http:
        answer = http.post(items_url(address), json=body, headers=auth, timeout=60)

    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert asyncio.run(CairnSession(address, "s").get_items()) == []


def test_hostile_session_requests_get_json_errors_and_change_nothing(address: Address, served: ServeProcess):
    auth = {"Authorization": f"Bearer {address.read_token}"}
    kept = [{"role": "user", "content": "kept"}]
    asyncio.run(CairnSession(address, "s").add_items(kept))
    cases = [
        ("POST", items_url(address), b"{not json", 400, "invalid_json"),
        ("POST", items_url(address), b'{"items": [' + b"[" * 300 + b"]" * 300 + b"]}", 400, "invalid_json"),
        ("POST", items_url(address), b'{"items": [{"a": "\xc3\x28"}]}', 400, "invalid_json"),
        ("POST", items_url(address), b'{"items": [{"a": 1e400}]}', 400, "invalid_json"),
        ("POST", items_url(address, "x" * 300), b'{"items": [{"a": 1}]}', 400, "invalid_request"),
        # Percent-encoding stays in the path, as API Gateway passes it: no session id is spelled with `%`.
        ("POST", items_url(address, "bad%00id"), b'{"items": [{"a": 1}]}', 400, "invalid_request"),
        ("POST", items_url(address, "s%2F..%2F..") + "/pop", None, 400, "invalid_request"),
        ("DELETE", items_url(address, "a b"), None, 400, "invalid_request"),
        ("GET", items_url(address) + "?limit=-1", None, 422, "invalid_request"),
        ("GET", items_url(address) + "?limit=abc", None, 422, "invalid_request"),
        ("GET", items_url(address) + "?before=0", None, 422, "invalid_request"),
        ("GET", items_url(address) + "?before=" + "9" * 40, None, 422, "invalid_request"),
    ]
    with served.client() as http:
        for method, url, body, status, code in cases:
            headers = {**auth, "Content-Type": "application/json"}
            answer = http.request(method, url, content=body, headers=headers, timeout=60)
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), (
                method,
                url,
                answer.text[:300],
            )
    assert asyncio.run(CairnSession(address, "s").get_items()) == kept


def test_session_requests_without_the_read_token_are_refused_alike(address: Address, served: ServeProcess):
    kept = [{"role": "user", "content": "kept"}]
    asyncio.run(CairnSession(address, "s").add_items(kept))
    other = f"{served.base_url}/api/v1/addresses/addr_{'0' * 24}/sessions/s/items"
    requests = [
        (method, url + path, body, headers)
        for url, headers in [
            (items_url(address), {}),
            (items_url(address), {"Authorization": "Bearer wrong"}),
            (other, {"Authorization": f"Bearer {address.read_token}"}),
        ]
        for method, path, body in [
            ("POST", "", {"items": [{"role": "user", "content": "forged"}]}),
            ("GET", "", None),
            ("POST", "/pop", None),
            ("DELETE", "", None),
        ]
    ]
    with served.client() as http:
        for method, url, body, headers in requests:
            answer = http.request(method, url, json=body, headers=headers, timeout=30)
            assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthorized"), (method, url)
    assert asyncio.run(CairnSession(address, "s").get_items()) == kept
