"""LangGraph checkpoints and store items against an address's storage limit on DynamoDB Local, from processes
of their own.

Processes racing to put checkpoints store exactly as many as fit; processes
racing to prune, delete by run and delete the same threads give back
exactly what was removed, once: the count ends equal to what the remaining
items count, and at zero when every thread is gone. Processes racing to
put store items into an address full of items whose TTL has passed take
those items' room once, and store exactly as many as fit.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator
from multiprocessing.pool import Pool
from typing import Any

import pytest

from cairn.checkpoints.models import Blob, NewCheckpoint, Write
from cairn.errors import StorageLimitExceeded
from cairn.graphstore.models import PutOp, SearchOp
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services
from tests.support.processes import process_context
from tests.support.storage_usage import counted, counted_items

SIZE = 20_000
FITTING = 7
PROCESSES = 4
STEPS = 6
THREADS = ("left", "right")


def services(endpoint: str, table: str, limit: int = 10**9):
    """Services on a clock at a whole second: a checkpoint's `created_at`, and so its count, is as long in each."""
    clock = FakeClock()
    clock.advance(math.ceil(clock()) - clock())
    return make_services(clock=clock, table_name=table, dynamodb_endpoint=endpoint, storage_max_bytes=limit)


def first_checkpoint(thread_id: str, size: int = SIZE, *, step: int = 0, parent_id: str | None = None) -> NewCheckpoint:
    return NewCheckpoint(
        thread_id=thread_id,
        checkpoint_ns="",
        checkpoint_id=f"c-{step:02d}",
        parent_id=parent_id,
        if_new_thread=parent_id is None,
        checkpoint=Blob(type="bytes", data=os.urandom(size)),
        metadata_json=json.dumps({"step": step, "run_id": f"run-{step % 2}"}),
    )


def put_own_threads(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> list[str]:
    """Starts four threads of its own, a checkpoint of SIZE bytes each; the threads the limit let in."""
    store = services(endpoint, table, limit).checkpoints
    threads = [f"p{process}-t{number}" for number in range(4)]
    return that_fit(threads, lambda thread_id: store.put(address_id, token, first_checkpoint(thread_id)))


@pytest.fixture(scope="module")
def processes() -> Iterator[Pool]:
    """Racing processes started once for the tests that need no start of their own."""
    with process_context().Pool(PROCESSES) as pool:
        yield pool


def that_fit(names: list[str], write: Callable[[str], object]) -> list[str]:
    """The names whose write the storage limit let in, each tried in turn."""
    landed = []
    for name in names:
        try:
            write(name)
        except StorageLimitExceeded:
            continue
        landed.append(name)
    return landed


def test_racing_processes_put_exactly_the_checkpoints_that_fit(dynamodb_local, local_table: str, processes: Pool):
    api = LambdaClient(services(dynamodb_local.endpoint, local_table))
    settings = api.services.settings
    probe = api.provision()
    api.services.checkpoints.put(probe["address"]["id"], probe["credentials"]["read_token"], first_checkpoint("p0-t0"))
    cost = counted(settings, probe["address"]["id"])  # what each process's threads count: ids of one length

    limit = FITTING * cost + cost - 1
    created = api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    arguments = [(dynamodb_local.endpoint, local_table, limit, address_id, token, process) for process in range(4)]
    landed = [thread for threads in processes.starmap(put_own_threads, arguments) for thread in threads]

    assert len(landed) == FITTING  # sixteen tried, seven fit, never eight
    assert counted(settings, address_id) == FITTING * cost == counted_items(settings, address_id)


def prune_or_delete_runs(endpoint: str, table: str, address_id: str, token: str, process: int) -> None:
    """Prunes both threads (processes 0 and 1) or deletes run-0's checkpoints from them (2 and 3)."""
    store = services(endpoint, table).checkpoints
    if process < 2:
        store.prune(address_id, token, thread_ids=THREADS, strategy="keep_latest")
    else:
        store.delete_for_runs(address_id, token, ["run-0"])


def delete_threads(endpoint: str, table: str, address_id: str, token: str, process: int) -> None:
    """Deletes both threads, starting with a different one than the next process."""
    store = services(endpoint, table).checkpoints
    for thread_id in (THREADS[process % 2], THREADS[(process + 1) % 2]):
        store.delete_thread(address_id, token, thread_id)


def write_threads(api: LambdaClient, address_id: str, token: str) -> None:
    """Both threads, each a chain of STEPS checkpoints of other sizes, every one with three writes."""
    store = api.services.checkpoints
    for thread_id in THREADS:
        parent = None
        for step in range(STEPS):
            checkpoint = first_checkpoint(thread_id, 2_000 + 100 * step, step=step, parent_id=parent)
            store.put(address_id, token, checkpoint)
            writes = [Write(f"task-{step}", index, "v", Blob("bytes", b"w" * (900 + index))) for index in range(3)]
            store.put_writes(
                address_id, token, thread_id=thread_id, checkpoint_ns="", checkpoint_id=checkpoint.checkpoint_id,
                writes=writes,
            )  # fmt: skip
            parent = checkpoint.checkpoint_id


def test_racing_prunes_and_deletions_give_back_exactly_what_they_remove(
    dynamodb_local, local_table: str, processes: Pool
):
    api = LambdaClient(services(dynamodb_local.endpoint, local_table))
    created = api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    settings = api.services.settings
    write_threads(api, address_id, token)
    written = counted(settings, address_id)
    assert written == counted_items(settings, address_id) > len(THREADS) * STEPS * (2_000 + 3 * 900)
    arguments = [(dynamodb_local.endpoint, local_table, address_id, token, process) for process in range(PROCESSES)]

    processes.starmap(prune_or_delete_runs, arguments)
    # Each thread keeps its newest checkpoint (or, when that was run-0's, the newest run-1 one) with its writes.
    assert 0 < counted(settings, address_id) == counted_items(settings, address_id) < written // 2

    processes.starmap(delete_threads, arguments)
    # Every removal released its items' bytes once: none twice (the count would fall below zero), none missed.
    assert counted(settings, address_id) == 0 == counted_items(settings, address_id)


# -- the LangGraph store -------------------------------------------------------------------------

NS = ("notes",)
# Items whose TTL passes, filling the address before the processes put theirs.
ENDED = 40


def store_value(size: int) -> dict[str, str]:
    return {"text": "x" * size}


def put_own_items(
    endpoint: str, table: str, limit: int, address_id: str, token: str, process: int, start: Any
) -> list[str]:
    """Puts four items of its own, each of SIZE bytes, the first when every process is ready; the keys that fit."""
    store = services(endpoint, table, limit).graph_store
    start.wait()
    item_keys = [f"p{process}-k{number}" for number in range(4)]
    return that_fit(
        item_keys, lambda item_key: store.batch(address_id, token, [PutOp(NS, item_key, store_value(SIZE))])
    )


def test_racing_processes_take_the_room_of_ended_items_once_and_put_exactly_what_fits(dynamodb_local, local_table: str):
    api = LambdaClient(services(dynamodb_local.endpoint, local_table))
    settings = api.services.settings
    probe = api.provision()
    api.services.graph_store.batch(
        probe["address"]["id"], probe["credentials"]["read_token"], [PutOp(NS, "p0-k0", store_value(SIZE))]
    )
    cost = counted(settings, probe["address"]["id"])
    limit = FITTING * cost + cost - 1
    created = api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    # The address full of small items that end in 60 ms: every process's first put finds it full, and all
    # of them set about removing the same ended items at once.
    store = services(dynamodb_local.endpoint, local_table, limit).graph_store
    size = limit // ENDED - 400  # the value's JSON, less what its key, times and row add
    for number in range(ENDED):
        store.batch(address_id, token, [PutOp(NS, f"e{number:02d}", store_value(size), ttl_minutes=0.001)])
    ended_at = math.ceil(time.time() + 0.06)  # an item's end is kept in whole seconds, rounded up
    assert limit - cost < counted(settings, address_id) <= limit
    time.sleep(max(ended_at - time.time(), 0) + 0.05)  # the processes may start at once: let the items end
    context = process_context()

    with context.Manager() as manager, context.Pool(PROCESSES) as pool:
        start = manager.Barrier(PROCESSES)
        arguments = [(dynamodb_local.endpoint, local_table, limit, address_id, token, p, start) for p in range(4)]
        landed = [item for items in pool.starmap(put_own_items, arguments) for item in items]

    assert len(landed) == FITTING  # the ended items' room, taken once: sixteen tried, seven fit, never eight
    assert counted(settings, address_id) == FITTING * cost == counted_items(settings, address_id)
    found = api.services.graph_store.batch(address_id, token, [SearchOp(NS, limit=100)])[0]
    assert sorted(item.key for item in found) == sorted(landed)


def test_store_items_past_their_ttl_give_their_room_to_every_writer(dynamodb_local, local_table: str):
    """They counted until a store put needed their room: a file, a session or a checkpoint was refused it."""
    clock = FakeClock()
    limit = 1_000_000
    services = make_services(
        clock=clock, table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, storage_max_bytes=limit
    )
    api = LambdaClient(services)
    writes: dict[str, Callable[[str, str], object]] = {
        "file": lambda address_id, token: services.files.write(address_id, token, "report.bin", os.urandom(200_000)),
        "session": lambda address_id, token: services.agent_sessions.add(
            address_id, token, "chat", [{"role": "user", "content": "x" * 200_000}]
        ),
        "checkpoint": lambda address_id, token: services.checkpoints.put(
            address_id, token, first_checkpoint("thread", 200_000)
        ),
    }
    for kind, write in writes.items():
        created = api.provision()
        address_id, token = created["address"]["id"], created["credentials"]["read_token"]
        services.graph_store.batch(address_id, token, [PutOp(NS, "memo", store_value(850_000), ttl_minutes=1)])
        clock.advance(120)
        write(address_id, token)  # refused before: the ended item's 850 KB still counted
        with pytest.raises(StorageLimitExceeded):  # and now full, with nothing left to give back
            services.files.write(address_id, token, "more.bin", os.urandom(850_000))
        assert services.graph_store.batch(address_id, token, [SearchOp(NS, limit=10)])[0] == [], kind
