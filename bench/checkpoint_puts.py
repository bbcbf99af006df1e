"""What write ownership costs a LangGraph checkpoint put, beside an unconditional put of the same item.

A `CairnSaver.put` that continues a thread is one transaction: the
address's token checked, the thread's head moved only while it is still the
checkpoint's parent, the checkpoint stored once, and the address's count of
stored bytes moved by what it counts (refused past the storage limit). DynamoDBSaver stores a
checkpoint with one unconditional `PutItem`, so two writers fork the thread
silently. Both, and Cairn's transaction sent with raw boto3, run here on the
same DynamoDB Local and the server's table, with the same checkpoint item:
one writer each, each put continuing the last, back to back for a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from bench.integration_calls import checkpoint, thread_config
from bench.report import Table
from bench.server import CairnServer
from bench.timing import LoadResult, run_load
from cairn import credentials, jsontext
from cairn.checkpoints.models import Blob, NewCheckpoint, Owner
from cairn.client.address import Address
from cairn.client.http import HttpClient
from cairn.dynamodb import checkpoint_items, storage_usage, table_ops
from cairn.dynamodb.client import make_client
from cairn.integrations.langgraph import CairnSaver
from cairn.settings import Settings

# A step of a graph with a few messages in its state, as `bench.integration_calls` puts.
STEP = 3


def measure_checkpoint_puts(server: CairnServer, settings: Settings, seconds: float, warmup: float) -> Table:
    # A transport of its own: the SDK then ignores proxies from the environment, as the server's client does.
    address = Address.provision(server.base_url, task_id="bench-puts", http=HttpClient(transport=httpx.HTTPTransport()))
    puts = [
        ("raw boto3 PutItem, unconditional (DynamoDBSaver's way)", _unconditional(address, settings)),
        (
            "raw boto3 TransactWriteItems, Cairn's put (token, head under its parent, the count)",
            _owned(address, settings),
        ),
        ("CairnSaver.put over HTTP (cairn serve)", _saver(address)),
    ]
    table = Table(
        f"Checkpoint puts with write ownership against unconditional puts (1 writer, {seconds:g} s each)",
        ["put", "outcomes", "puts/s", "p50 ms", "p99 ms", "p50 vs PutItem", "puts/s vs PutItem"],
    )
    unconditional: LoadResult | None = None
    for name, put in puts:
        result = run_load([put], seconds, warmup)
        unconditional = unconditional or result
        table.add(
            name, result.outcome_text(), result.per_second, result.p50_ms(), result.p99_ms(),
            f"{result.p50_ms() / unconditional.p50_ms():.2f}x", f"{result.per_second / unconditional.per_second:.0%}",
        )  # fmt: skip
    table.notes += [
        "The same checkpoint item each time (a graph's state of a few messages, through LangGraph's "
        "JsonPlusSerializer), with a new checkpoint id; each put continues the one before it.",
        "The transaction: a ConditionCheck of the address's token, the head Put under `head = parent`, the "
        "checkpoint Put under `attribute_not_exists`, the Update of the address's count of stored bytes under its "
        "limit. The saver's put adds serializing the checkpoint, HTTP, the "
        "API's own read of the address, and that transaction.",
    ]
    return table


class _Chain:
    """Checkpoints of one thread, each continuing the last, stored as the service stores them."""

    def __init__(self, address: Address, settings: Settings, thread_id: str) -> None:
        self.owner = Owner(address.id, credentials.digest(address.read_token), None)
        self.table = settings.table_name
        self.thread_id = thread_id
        self.kind, self.data = JsonPlusSerializer().dumps_typed(checkpoint(STEP))
        self.metadata = jsontext.canonical({"step": STEP})
        self.parent: str | None = None

    def next(self) -> NewCheckpoint:
        made = NewCheckpoint(
            self.thread_id,
            "",
            empty_checkpoint()["id"],
            self.parent,
            self.parent is None,
            Blob(self.kind, self.data),
            self.metadata,
        )
        self.parent = made.checkpoint_id
        return made


def _unconditional(address: Address, settings: Settings) -> Callable[[], str]:
    client = make_client(settings)
    chain = _Chain(address, settings, "raw-put")

    def put() -> str:
        item = checkpoint_items.checkpoint_put(chain.table, chain.owner, chain.next(), now=time.time())
        client.put_item(TableName=chain.table, Item=item["Put"]["Item"])
        return "stored"

    return put


def _owned(address: Address, settings: Settings) -> Callable[[], str]:
    client = make_client(settings)
    chain = _Chain(address, settings, "raw-transaction")
    limit = settings.storage_max_bytes

    def put() -> str:
        made = chain.next()
        stored = checkpoint_items.checkpoint_put(chain.table, chain.owner, made, now=time.time())
        growth = storage_usage.counted(stored["Put"]["Item"])
        charge = storage_usage.charge(chain.table, chain.owner.address_id, growth, max_bytes=limit, expiry={})
        table_ops.transact_write(
            client,
            [
                checkpoint_items.address_check(chain.table, chain.owner, now=time.time()),
                checkpoint_items.head_put(chain.table, chain.owner, made),
                stored,
                *([charge] if charge else []),
            ],
        )
        return "stored"

    return put


def _saver(address: Address) -> Callable[[], str]:
    saver = CairnSaver(address)
    head = [thread_config("saver")]

    def put() -> str:
        head[0] = saver.put(head[0], checkpoint(STEP), {"step": STEP}, {})
        return "stored"

    return put
