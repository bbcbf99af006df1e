"""What the integrations' reads cost as a session or thread grows, and what write ownership costs a put.

Reads: a 100-item session and a long one (`CairnSession.get_items(limit=20)`),
a 100-checkpoint thread and a long one (`CairnSaver.get_tuple` of the latest,
`CairnSaver.list(limit=20)`), timed over HTTP against `cairn serve` and
counted in-process (`bench.sdk`) on the same items. If a read's cost grew
with length, the long rows would be slower and read more than the short ones.

Long histories written call by call would take minutes on DynamoDB Local,
so they are written directly in batches, item for item as the service
stores them (`agent_session_items`, `checkpoint_items`) with the head that
counts them; then one real call (an add, a put continuing the head) ends
each, and must find the history whole to commit.

Write ownership: a put that continues a thread's head is one transaction
(the address's token, the head under its parent, the checkpoint). Beside
it, on the same DynamoDB Local and the server's table, the same checkpoint
item stored with one unconditional `PutItem` (as DynamoDBSaver stores
checkpoints) and Cairn's transaction sent with raw boto3: one writer each,
back to back for a fixed time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from bench.calls import CairnProcess
from bench.integration_calls import ITEM, TURN_ITEMS, checkpoint, thread_config
from bench.report import Table
from bench.runtime_pages import ItemsRead
from bench.sdk import connect
from bench.server import CairnServer
from bench.timing import percentile_ms
from cairn import credentials, jsontext
from cairn.checkpoints.models import Blob, NewCheckpoint, Owner
from cairn.client.address import Address
from cairn.client.http import HttpClient
from cairn.dynamodb import agent_session_items, checkpoint_items
from cairn.dynamodb.agent_session_items import Head
from cairn.dynamodb.client import make_client
from cairn.integrations.langgraph import CairnSaver
from cairn.integrations.openai_agents import CairnSession
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

SHORT = 100
BATCH_WRITE = 25
Item = dict[str, Any]


class Histories:
    """One address on the server's table: a short and a long session and thread, each ended by a real call."""

    def __init__(self, server: CairnServer, settings: Settings, long: int) -> None:
        # A transport of its own: the SDK then ignores proxies from the environment, as the server's client does.
        http = HttpClient(transport=httpx.HTTPTransport())
        self.address = Address.provision(server.base_url, task_id="bench-integrations", http=http)
        self.owner = Owner(self.address.id, credentials.digest(self.address.read_token), None)
        self.client = make_client(settings)
        self.table = settings.table_name
        self.lengths = (SHORT, long)
        self.session_of = {size: self._session(size) for size in self.lengths}
        self.thread_of = {size: self._thread(size) for size in self.lengths}

    def _session(self, size: int) -> str:
        session_id = f"history-{size}"
        items = [
            put["Put"]["Item"]
            for seq in range(1, size)
            for put in agent_session_items.item_puts(
                self.table, self.owner, session_id, seq, _item_text(seq), jsontext.sent_size(_item_text(seq))
            )
        ]
        _batch_put(self.client, self.table, items)
        # Written around the address's count of stored bytes, so the head counts none of them.
        head = agent_session_items.head_put(self.table, self.owner, session_id, Head(), Head().added(size - 1, 0))
        self.client.put_item(TableName=self.table, Item=head["Put"]["Item"])
        session = CairnSession(self.address, session_id)
        last: Any = {**ITEM, "n": size}
        asyncio.run(session.add_items([last]))
        if [dict(item).get("n") for item in asyncio.run(session.get_items(limit=2))] != [size - 1, size]:
            raise RuntimeError(f"a {size}-item session written in batches did not take its next add as the last")
        return session_id

    def _thread(self, size: int) -> str:
        thread_id = f"history-{size}"
        serde = JsonPlusSerializer()
        parent: str | None = None
        items = []
        for step in range(size - 1):
            made = checkpoint(step)
            kind, data = serde.dumps_typed(made)
            new = NewCheckpoint(
                thread_id, "", made["id"], parent, False, Blob(kind, data), jsontext.canonical({"step": step})
            )
            items.append(checkpoint_items.checkpoint_put(self.table, self.owner, new, now=time.time())["Put"]["Item"])
            parent = made["id"]
        _batch_put(self.client, self.table, items)
        self.client.put_item(
            TableName=self.table, Item=checkpoint_items.head_put(self.table, self.owner, new)["Put"]["Item"]
        )
        # A put continuing the head commits only if the head the batches wrote is the thread's.
        CairnSaver(self.address).put(thread_config(thread_id, parent), checkpoint(size), {"step": size - 1}, {})
        return thread_id

    # -- the reads, each on the history of a length, through an address's client --

    def get_items(self, address: Address, size: int) -> Callable[[], object]:
        session = CairnSession(address, self.session_of[size])
        return lambda: asyncio.run(session.get_items(limit=TURN_ITEMS))

    def get_tuple(self, address: Address, size: int) -> Callable[[], object]:
        saver, config = CairnSaver(address), thread_config(self.thread_of[size])
        return lambda: saver.get_tuple(config)

    def listed(self, address: Address, size: int) -> Callable[[], object]:
        saver, config = CairnSaver(address), thread_config(self.thread_of[size])
        return lambda: list(saver.list(config, limit=TURN_ITEMS))


def _item_text(seq: int) -> str:
    return jsontext.canonical({**ITEM, "n": seq})


def _batch_put(client: DynamoDBClient, table: str, items: list[Item]) -> None:
    for start in range(0, len(items), BATCH_WRITE):
        pending: Any = {table: [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH_WRITE]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems")


def measure_read_costs(server: CairnServer, settings: Settings, long: int, trials: int) -> Table:
    """Each read on the short and the long history: calls and items read in-process, latency over HTTP."""
    histories = Histories(server, settings, long)
    process = CairnProcess(settings)
    counted, _ = connect(process, histories.address.id, histories.address.read_token)
    items = ItemsRead(process.client)
    table = Table(
        f"Integration reads against length (p50 and p99 over HTTP to cairn serve, {trials} trials per row)",
        ["call", "length", "DynamoDB calls per call", "items read per call", "p50 ms", "p99 ms", "p50 vs 100"],
    )
    reads: list[tuple[str, Callable[[Address, int], Callable[[], object]]]] = [
        (f"CairnSession.get_items(limit={TURN_ITEMS})", histories.get_items),
        ("CairnSaver.get_tuple (latest)", histories.get_tuple),
        (f"CairnSaver.list(limit={TURN_ITEMS})", histories.listed),
    ]
    for name, read in reads:
        short_p50 = None
        for size in histories.lengths:
            counted_call = read(counted, size)
            counted_call()  # warm: the first read of a range may pay for caches
            process.counter.take()
            items.take()
            for _ in range(trials):
                counted_call()
            calls = process.counter.take(per=trials)
            latencies = _timed(read(histories.address, size), trials)
            p50 = percentile_ms(latencies, 50)
            short_p50 = short_p50 or p50
            table.add(
                name, f"{size:,}", calls, round(items.take() / trials), p50, percentile_ms(latencies, 99),
                round(p50 / short_p50, 2),
            )  # fmt: skip
    table.notes += [
        f"The long history holds {long:,} items or checkpoints (--quick writes a shorter one): all but the last "
        "written in batches as the service stores them, the last by a real call.",
        "Items read: what the Query calls returned before the answer was cut at its limit.",
    ]
    return table


def _timed(call: Callable[[], object], trials: int) -> list[float]:
    for _ in range(3):  # warm: the connection and the server's first read of the range
        call()
    latencies = []
    for _ in range(trials):
        began = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - began)
    return latencies
