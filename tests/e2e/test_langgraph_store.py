"""`CairnStore`, LangGraph's long-term store on Cairn, against `cairn serve` over real HTTP.

The same op sequences on `CairnStore` and on LangGraph's own `InMemoryStore`
answer the same; items put with a TTL disappear once it passes; two
processes writing one item under the version they read never both win.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

from cairn.client import Address
from cairn.integrations.langgraph import CairnStore
from tests.support import docs, langgraph_runs
from tests.support.processes import process_context
from tests.support.serve import ServeProcess, wait_until

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

DOCS = [
    (("docs", "user1"), "a", {"kind": "note", "score": 1, "tags": ["x"], "meta": {"lang": "en"}}),
    (("docs", "user1"), "b", {"kind": "note", "score": 5, "tags": ["x", "y"], "meta": {"lang": "fr"}}),
    (("docs", "user1", "drafts"), "c", {"kind": "draft", "score": 3.5, "tags": [], "meta": {"lang": "en"}}),
    (("docs", "user2"), "d", {"kind": "note", "score": 7, "flag": True, "meta": {"lang": "en"}}),
    (("memories", "user1", "prefs"), "e", {"kind": "pref", "score": -2, "text": "likes tea"}),
    (("memories", "user2", "prefs"), "f", {"kind": "pref", "score": 0, "text": "long " * 20}),
    (("a label with spaces/and slashes", "ü 名前", "x" * 200), "key with spaces #and/odd", {"kind": "odd", "score": 2}),
]
FILTERS = [
    {},
    {"kind": "note"},
    {"kind": "note", "score": 5},
    {"score": {"$gt": 2}},
    {"score": {"$gte": 3.5, "$lt": 7}},
    {"score": {"$lte": 0}},
    {"kind": {"$ne": "note"}},
    {"kind": {"$eq": "pref"}},
    {"tags": ["x", "y"]},
    {"meta": {"lang": "en"}},
    {"flag": True},
    {"missing": None},
]
PREFIXES = [(), ("docs",), ("docs", "user1"), ("memories",), ("nothing",)]
LISTINGS: list[dict[str, Any]] = [
    {},
    {"prefix": ("docs",)},
    {"prefix": ("docs", "*")},
    {"suffix": ("prefs",)},
    {"prefix": ("memories",), "suffix": ("prefs",)},
    {"max_depth": 1},
    {"max_depth": 2},
    {"prefix": ("docs",), "max_depth": 2},
    {"limit": 2, "offset": 1},
    {"prefix": ("*", "user1")},
]


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="langgraph-store", expires_in=3600) as created:
        yield created


def items(found: list) -> list[tuple]:
    """What a search answers, without its order: Cairn answers in storage order, the in-memory store in put order."""
    return sorted((item.namespace, item.key, json.dumps(item.value, sort_keys=True)) for item in found)


def fill(*stores: BaseStore) -> None:
    for store in stores:
        for namespace, key, value in DOCS:
            store.put(namespace, key, value)


def test_gets_searches_and_namespace_listings_answer_as_langgraphs_in_memory_store(address: Address):
    cairn, memory = CairnStore(address), InMemoryStore()
    fill(cairn, memory)

    for namespace, key, _ in DOCS:
        ours, theirs = cairn.get(namespace, key), memory.get(namespace, key)
        assert ours is not None and theirs is not None
        assert (ours.namespace, ours.key, ours.value) == (theirs.namespace, theirs.key, theirs.value)
    assert cairn.get(("docs", "user1"), "nope") is None and cairn.get(("docs",), "a") is None
    for prefix in PREFIXES:
        for conditions in FILTERS:
            ours = cairn.search(prefix, filter=conditions, limit=100)
            assert items(ours) == items(memory.search(prefix, filter=conditions, limit=100)), (prefix, conditions)
    for listing in LISTINGS:
        if "limit" in listing:
            continue  # paged below, where order matters
        assert cairn.list_namespaces(**listing) == memory.list_namespaces(**listing), listing
    assert cairn.list_namespaces(limit=2, offset=1) == memory.list_namespaces(limit=2, offset=1)


def test_limit_and_offset_page_through_a_search_without_gaps_or_repeats(address: Address):
    cairn, memory = CairnStore(address), InMemoryStore()
    fill(cairn, memory)

    pages = [cairn.search((), limit=2, offset=offset) for offset in range(0, 10, 2)]

    assert [len(page) for page in pages] == [
        len(page) for page in (memory.search((), limit=2, offset=o) for o in range(0, 10, 2))
    ]
    assert items([item for page in pages for item in page]) == items(memory.search((), limit=100))
    assert cairn.search((), limit=0) == [] and cairn.search((), offset=100) == []


def test_puts_over_and_deletes_answer_as_the_in_memory_store(address: Address):
    cairn, memory = CairnStore(address), InMemoryStore()
    fill(cairn, memory)
    for store in (cairn, memory):
        store.put(("docs", "user1"), "a", {"kind": "note", "score": 10})
        store.delete(("docs", "user1"), "b")
        store.delete(("docs", "user1"), "never-there")
        store.delete(("memories", "user2", "prefs"), "f")
        store.batch([])

    assert items(cairn.search((), limit=100)) == items(memory.search((), limit=100))
    # The in-memory store goes on listing a namespace whose last item it deleted; Cairn lists those with items.
    assert cairn.list_namespaces() == sorted({item.namespace for item in memory.search((), limit=100)})
    assert items(cairn.search(("docs",), filter={"score": {"$gt": 6}})) == items(
        memory.search(("docs",), filter={"score": {"$gt": 6}})
    )


def test_the_async_methods_answer_as_the_sync_ones(address: Address):
    cairn = CairnStore(address)

    async def scenario() -> tuple:
        await cairn.aput(("async",), "k", {"n": 1})
        got = await cairn.aget(("async",), "k")
        found = await cairn.asearch(("async",), filter={"n": 1})
        spaces = await cairn.alist_namespaces(prefix=("async",))
        version = await cairn.aput_if_version(("async",), "k", {"n": 2}, expected_version=1)
        await cairn.adelete(("async",), "k")
        return got.value, [item.key for item in found], spaces, version, await cairn.aget(("async",), "k")

    assert asyncio.run(scenario()) == ({"n": 1}, ["k"], [("async",)], 2, None)


def test_namespaces_langgraph_refuses_are_refused_before_any_request(address: Address):
    cairn = CairnStore(address)
    for namespace in [("a.b",), ("",), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            cairn.put(namespace, "k", {"n": 1})
    assert cairn.list_namespaces() == []


def test_an_item_put_with_a_ttl_is_gone_once_it_passes_and_others_stay(address: Address):
    cairn = CairnStore(address)
    cairn.put(("ttl",), "short", {"n": 1}, ttl=0.02)  # 1.2 seconds
    cairn.put(("ttl",), "kept", {"n": 2})
    cairn.put(("ttl", "alone"), "short", {"n": 3}, ttl=0.02)

    # Both short-lived items, the later one too: a search of ("ttl",) finds the one in ("ttl", "alone").
    assert wait_until(
        lambda: all(
            cairn.get(namespace, "short", refresh_ttl=False) is None for namespace in [("ttl",), ("ttl", "alone")]
        ),
        timeout=30,
    )

    assert [item.key for item in cairn.search(("ttl",))] == ["kept"]
    assert cairn.list_namespaces(prefix=("ttl",)) == [("ttl",)]
    assert cairn.get(("ttl",), "kept").value == {"n": 2}


def test_of_two_processes_writing_one_item_under_the_version_read_one_wins_each_round(
    address: Address, served: ServeProcess
):
    rounds = 15
    cairn = CairnStore(address)
    cairn.put(("race",), "counter", {"n": 0})

    context = process_context()
    barrier, results = context.Barrier(2), context.Queue()
    args = (served.base_url, address.id, address.read_token, rounds, barrier, results)
    workers = [context.Process(target=langgraph_runs.store_race, args=args) for _ in range(2)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=240) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    won = sum(w for w, _ in outcomes)
    refused = sum(r for _, r in outcomes)
    assert won == rounds  # exactly one writer a round
    assert refused == rounds  # and the other was refused, never overwritten silently
    item, version = cairn.get_versioned(("race",), "counter")
    assert item is not None and item.value == {"n": rounds}  # no increment lost, none applied twice
    assert version == rounds + 1


def test_the_store_example_of_the_langgraph_page_runs_as_written(
    address: Address, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    [example] = [block for block in docs.runnable("docs/langgraph.md") if "CairnStore(" in block.text]
    address.save(tmp_path / "address.json")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()

    with contextlib.redirect_stdout(printed):
        exec(compile(example.text, str(example), "exec"), {})

    assert printed.getvalue() == "refused: the item is at version 2\n"
    assert CairnStore(address).get(("users", "u1", "memories"), "tea").value["weight"] == 4
