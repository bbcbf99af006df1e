"""The frameworks' async writes, cancelled midway (LangGraph's on `CairnSaver` and `CairnStore`, Strands' on
`CairnStorage`): the caller hears of it once the write has settled, so a run resumed right after reads what
the cancelled one stored, and nothing it stores is overwritten by a write still on its way."""

from __future__ import annotations

import asyncio
import operator
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from cairn.client import Address, HttpClient
from cairn.integrations.langgraph import CairnSaver, CairnStore
from cairn.integrations.strands import CairnStorage
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def record(api: LambdaClient) -> dict[str, Any]:
    return api.provision()


class HeldWrite:
    """A transport that holds the `held`-th write (a POST or DELETE) until `release`, then records its answer."""

    def __init__(self, api: LambdaClient, *, held: int = 1, path_end: str = "") -> None:
        self._api = api
        self._held = held
        self._path_end = path_end
        self._writes = 0
        self.sent = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        writing = request.method in ("POST", "DELETE") and request.url.path.endswith(self._path_end)
        reading = request.url.path.endswith(("/search", "/get", "/read", "/list"))  # reads that POST
        if not writing or reading:
            return self._api.handle(request)
        self._writes += 1
        if self._writes != self._held:
            return self._api.handle(request)
        self.sent.set()
        self.release.wait(30)
        answer = self._api.handle(request)
        self.answered.set()
        return answer


def address_over(record: dict[str, Any], transport: Callable[[httpx.Request], httpx.Response]) -> Address:
    return Address(record, http=HttpClient(transport=httpx.MockTransport(transport)))


async def cancelled_midway(start: Awaitable[Any], held: HeldWrite) -> bool:
    """Cancel `start` while its write is held, release the write a moment later: whether the write had answered
    when the cancellation reached the caller."""
    running = asyncio.ensure_future(start)
    await asyncio.to_thread(held.sent.wait, 30)
    running.cancel()
    threading.Timer(0.2, held.release.set).start()
    with pytest.raises(asyncio.CancelledError):
        await running
    return held.answered.is_set()


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def three_steps(saver: CairnSaver) -> CompiledStateGraph:
    graph = StateGraph(Steps)
    for name in ("a", "b", "c"):
        graph.add_node(name, lambda _state, name=name: {"steps": [name]})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph.compile(checkpointer=saver)


def test_a_run_cancelled_during_a_checkpoint_put_resumes_at_once_from_what_it_stored(
    api: LambdaClient, record: dict[str, Any]
):
    """With `durability="sync"` LangGraph awaits each put in the run. Cancelled while one was on its way, the run
    used to end at once, and the put landed later: a run resumed meanwhile read the thread before it and was
    refused as a fork of it (`CheckpointStale`) when it stored its own next checkpoint."""
    held = HeldWrite(api, held=2, path_end="/checkpoints")  # the checkpoint after step a
    late_put_landed = threading.Event()

    def resuming(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/checkpoints"):
            # The resumed run's first put goes only once the cancelled run's put has landed, as it may.
            held.release.set()
            late_put_landed.wait(30)
        return api.handle(request)

    def holding_then_noting(request: httpx.Request) -> httpx.Response:
        answer = held(request)
        if held.answered.is_set():
            late_put_landed.set()
        return answer

    config: Any = {"configurable": {"thread_id": "cancelled"}}

    async def cancelled_then_resumed() -> tuple[bool, dict[str, Any]]:
        cancelled = three_steps(CairnSaver(address_over(record, holding_then_noting)))
        settled = await cancelled_midway(cancelled.ainvoke({"steps": []}, config, durability="sync"), held)
        resumed = three_steps(CairnSaver(address_over(record, resuming)))
        return settled, await resumed.ainvoke(None, config, durability="sync")

    settled, final = asyncio.run(cancelled_then_resumed())
    assert settled
    assert final == {"steps": ["a", "b", "c"]}


def _saver_writes() -> dict[str, Callable[[CairnSaver], Awaitable[Any]]]:
    config = generate_config("t")
    return {
        "aput": lambda saver: saver.aput(config, generate_checkpoint(), generate_metadata(), {}),
        "aput_writes": lambda saver: saver.aput_writes(
            {"configurable": {**config["configurable"], "checkpoint_id": "1"}}, [("channel", 1)], "task"
        ),
        "adelete_thread": lambda saver: saver.adelete_thread("t"),
        "adelete_for_runs": lambda saver: saver.adelete_for_runs(["run"]),
        "acopy_thread": lambda saver: saver.acopy_thread("t", "copy"),
        "aprune": lambda saver: saver.aprune(["t"]),
    }


@pytest.mark.parametrize("write", list(_saver_writes()))
def test_each_async_write_of_the_saver_settles_before_its_cancelled_caller_hears(
    api: LambdaClient, record: dict[str, Any], write: str
):
    held = HeldWrite(api)
    saver = CairnSaver(address_over(record, held))
    assert asyncio.run(cancelled_midway(_saver_writes()[write](saver), held))


STORE_WRITES: dict[str, Callable[[CairnStore], Awaitable[Any]]] = {
    "aput": lambda store: store.aput(("notes",), "k", {"v": 2}),
    "adelete": lambda store: store.adelete(("notes",), "k"),
    "aput_if_version": lambda store: store.aput_if_version(("notes",), "k", {"v": 2}, expected_version=1),
}


@pytest.mark.parametrize("write", list(STORE_WRITES))
def test_each_async_write_of_the_store_settles_before_its_cancelled_caller_hears(
    api: LambdaClient, record: dict[str, Any], write: str
):
    CairnStore(address_over(record, api.handle)).put(("notes",), "k", {"v": 1})
    held = HeldWrite(api)
    assert asyncio.run(cancelled_midway(STORE_WRITES[write](CairnStore(address_over(record, held))), held))
    stored = CairnStore(address_over(record, api.handle)).get(("notes",), "k")
    assert (stored and stored.value) == (None if write == "adelete" else {"v": 2})


def test_a_strands_snapshot_written_as_its_run_is_cancelled_lands_before_the_next_run_writes_its_own(
    api: LambdaClient, record: dict[str, Any]
):
    """Storage keeps the last write. A write still on its way after its caller heard of the cancellation
    landed over the snapshot the next run wrote meanwhile, which was lost."""
    held = HeldWrite(api)

    async def cancelled_then_written_again() -> bool:
        settled = await cancelled_midway(CairnStorage(address_over(record, held)).write("snapshot", b"cancelled"), held)
        await CairnStorage(address_over(record, api.handle)).write("snapshot", b"resumed")
        await asyncio.to_thread(held.answered.wait, 30)
        return settled

    settled = asyncio.run(cancelled_then_written_again())
    assert asyncio.run(CairnStorage(address_over(record, api.handle)).read("snapshot")) == b"resumed"
    assert settled


def test_a_strands_delete_settles_before_its_cancelled_caller_hears(api: LambdaClient, record: dict[str, Any]):
    asyncio.run(CairnStorage(address_over(record, api.handle)).write("snapshot", b"old"))
    held = HeldWrite(api)
    assert asyncio.run(cancelled_midway(CairnStorage(address_over(record, held)).delete("snapshot"), held))
    assert asyncio.run(CairnStorage(address_over(record, api.handle)).read("snapshot")) is None
