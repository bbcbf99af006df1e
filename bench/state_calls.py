"""DynamoDB calls per state operation, counted on the service's own client.

Requests go through the resolver Lambda runs (see `bench.calls`). Every
state operation authenticates and reads what it needs first; every change
commits in one transaction with its `state.updated` events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from bench.address import Address
from bench.calls import CairnProcess, CallCounts, Scenario, status_text
from bench.cas import CLIENTS, HOT_KEY, OWN_KEYS, CasWriter, Send, StateCounters, keys_by_client
from bench.gateway import Reply
from bench.report import Table
from cairn.settings import Settings

BATCH_SIZE = 5
# Per writer in the concurrent rows: a hot key makes each increment cost many
# requests, and the mean settles well before the run gets long.
INCREMENTS_EACH = 5
VALUE = {"step": 3, "todo": ["render", "upload"]}


def resolver_sender(process: CairnProcess, address: Address) -> Send:
    return lambda method, path, body: process.request(method, path, headers=address.auth, json_body=body)


class StateRequests:
    """The state API of one process, on addresses it provisions."""

    def __init__(self, process: CairnProcess) -> None:
        self.process = process

    def new_address(self) -> Address:
        return Scenario(self.process, history=False).address

    def get(self, address: Address, key: str) -> Reply:
        return self.process.request("GET", address.state_key_path(key), headers=address.auth)

    def list_keys(self, address: Address) -> Reply:
        return self.process.request("GET", address.state_path, headers=address.auth)

    def put(self, address: Address, key: str, if_revision: int) -> Reply:
        body = {"value": VALUE, "if_revision": if_revision}
        return self.process.request("PUT", address.state_key_path(key), headers=address.auth, json_body=body)

    def delete(self, address: Address, key: str, if_match: int) -> Reply:
        headers = {**address.auth, "If-Match": str(if_match)}
        return self.process.request("DELETE", address.state_key_path(key), headers=headers)

    def batch(self, address: Address, keys: list[str], if_revision: int, value: Any = VALUE) -> Reply:
        body = {"operations": [{"key": key, "op": "set", "value": value, "if_revision": if_revision} for key in keys]}
        return self.process.request("POST", address.state_path, headers=address.auth, json_body=body)


def measure_state_calls(settings: Settings, repeats: int) -> Table:
    table = Table(
        "DynamoDB calls per state operation (resolver with API Gateway events, DynamoDB Local)",
        ["operation", "status", f"DynamoDB calls (mean of {repeats})", "transaction items"],
    )
    api = StateRequests(CairnProcess(settings))
    counter = api.process.counter

    def count(name: str, requests: list[Callable[[], Reply]]) -> None:
        counter.take()
        statuses = Counter(request().status for request in requests)
        counts = counter.take(per=len(requests))
        table.add(name, status_text(statuses), counts, counts.items_per_operation)

    # One key per repeat, so each row meets every key in the same state (an
    # address holds at most 32 keys, more than the repeats).
    address = api.new_address()
    keys = [f"k{index}" for index in range(repeats)]
    count("write, create (if_revision 0)", [partial(api.put, address, key, 0) for key in keys])
    count("write, replace (if_revision N)", [partial(api.put, address, key, 1) for key in keys])
    count("write, stale if_revision (conflict)", [partial(api.put, address, key, 1) for key in keys])
    count("read a key", [partial(api.get, address, key) for key in keys])
    count("list keys", [partial(api.list_keys, address)] * repeats)
    count("delete (If-Match N)", [partial(api.delete, address, key, 2) for key in keys])

    batched = api.new_address()
    batch_keys = [f"b{index}" for index in range(BATCH_SIZE)]
    api.batch(batched, batch_keys, 0)
    count(
        f"batch of {BATCH_SIZE} sets (if_revision N)",
        [partial(api.batch, batched, batch_keys, revision) for revision in range(1, repeats + 1)],
    )

    mismatches = []
    for scenario in (HOT_KEY, OWN_KEYS):
        for processes in ([api.process] * CLIENTS, [CairnProcess(settings) for _ in range(CLIENTS)]):
            layout = "one process" if len(set(processes)) == 1 else f"{CLIENTS} processes"
            name = f"CAS increment, {scenario.replace('clients', 'writers')}, {layout}"
            counts, statuses, exact = _concurrent_increments(api, processes, keys_by_client(scenario), INCREMENTS_EACH)
            table.add(name, statuses, counts, counts.items_per_operation)
            if not exact:
                mismatches.append(name)

    table.notes += [
        "Each row repeats one request on a key (or batch) in the same state; setting it up is not counted.",
        "Transaction items: actions per operation over every TransactWriteItems it sent (each a billed write): "
        "key items, the usage item when totals change, the address head and the state.updated events.",
        f"CAS increment rows: {CLIENTS} threads each make {INCREMENTS_EACH} increments (GET, PUT with if_revision, "
        "again on 409) on keys created beforehand, in one new address; the mean is per successful increment. "
        f"One process shares the resolver (like cairn serve), {CLIENTS} processes do not (like Lambda containers).",
    ]
    if mismatches:
        table.notes.append("The counters do NOT hold exactly the increments that succeeded: " + "; ".join(mismatches))
    return table


def _concurrent_increments(
    api: StateRequests, processes: list[CairnProcess], keys_of: list[list[str]], increments_each: int
) -> tuple[CallCounts, str, bool]:
    """Each process's thread increments its keys in turn; calls per successful increment."""
    address = api.new_address()
    all_keys = sorted({key for keys in keys_of for key in keys})
    api.batch(address, all_keys, 0, value=0)
    writers = [
        CasWriter(StateCounters(resolver_sender(process, address), address), keys)
        for process, keys in zip(processes, keys_of, strict=True)
    ]
    unique = list({id(process): process for process in processes}.values())
    for process in unique:
        process.counter.take()

    def increment_many(writer: CasWriter) -> None:
        for _ in range(increments_each):
            writer.write()

    with ThreadPoolExecutor(len(writers)) as pool:
        list(pool.map(increment_many, writers))
    writes = sum(writer.writes for writer in writers)
    counts = CallCounts.combined([process.counter.take() for process in unique], per=writes)
    statuses = +Counter({200: writes, 409: sum(writer.conflicts for writer in writers)})
    exact = sum(writers[0].counters.value(key) for key in all_keys) == writes
    return counts, status_text(statuses), exact
