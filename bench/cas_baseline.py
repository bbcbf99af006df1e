"""The state write's transaction in raw boto3: what DynamoDB Local allows at best.

An increment reads the key's item (consistent GetItem), then commits one
`TransactWriteItems`: an Update of the key's item under `revision = :read`
(`attribute_not_exists` for a new key), the head Update that moves `last_seq`
from N to N+1 and the event Put. Those are the items of Cairn's state write,
without HTTP, the resolver, credentials or the usage item. The head is
guessed as in the inbox baseline; a failed key condition is a real conflict,
so the writer reads again and retries, as a client does after a 409.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.baseline import ExtraConditionFailed, RawAppender
from bench.calls import CallCounter
from bench.cas import CLIENTS, HOT_KEY, OWN_KEYS, CasRun, CasWriter, keys_by_client, run_cas
from bench.report import Table
from cairn.dynamodb.items import get_int, key, n

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


class RawCounters:
    """Counters as key items beside one head, each writer with its own head guess."""

    def __init__(self, client: DynamoDBClient, table: str, head: str) -> None:
        self._client = client
        self._table = table
        self._head = head
        self._appender = RawAppender(client, table, head)

    def increment(self, name: str) -> int:
        conflicts = 0
        while True:
            value, revision = self._read(name)
            try:
                self._appender.append([self._update(name, value + 1, revision)])
            except ExtraConditionFailed:
                conflicts += 1
                continue
            return conflicts

    def value(self, name: str) -> int:
        return self._read(name)[0]

    def _read(self, name: str) -> tuple[int, int]:
        response = self._client.get_item(TableName=self._table, Key=key(self._head, f"S#{name}"), ConsistentRead=True)
        item = response.get("Item")
        return (get_int(item, "value"), get_int(item, "revision")) if item else (0, 0)

    def _update(self, name: str, value: int, revision: int) -> dict[str, Any]:
        values = {":value": n(value), ":revision": n(revision + 1)}
        if revision:
            condition = "revision = :read"
            values[":read"] = n(revision)
        else:
            condition = "attribute_not_exists(pk)"
        return {
            "Update": {
                "TableName": self._table,
                "Key": key(self._head, f"S#{name}"),
                "UpdateExpression": "SET #value = :value, revision = :revision",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#value": "value"},
                "ExpressionAttributeValues": values,
            }
        }


def measure_cas_baseline(
    client: DynamoDBClient, table_name: str, seconds: float, warmup: float
) -> tuple[Table, dict[str, CasRun]]:
    """`client` is counted, so it should serve nothing else while this runs."""
    counter = CallCounter(client)
    results: dict[str, CasRun] = {}
    for number, scenario in enumerate((HOT_KEY, OWN_KEYS)):
        head = f"CAS#{number}"
        client.put_item(TableName=table_name, Item={**key(head, "META"), "last_seq": n(0)})
        writers = [CasWriter(RawCounters(client, table_name, head), keys) for keys in keys_by_client(scenario)]
        results[scenario] = run_cas(writers, seconds, warmup, counter)

    table = Table(
        f"Baseline: raw boto3 compare-and-set (key Update + head Update + event Put) on DynamoDB Local "
        f"({seconds:g} s per row)",
        ["scenario", "writes", "writes/s", "p50 ms", "p99 ms", "conflicts per write", "DynamoDB calls per write",
         "counters exact"],
    )  # fmt: skip
    for name, run in results.items():
        load = run.load
        table.add(
            name.replace("clients", "threads"), run.writes, load.per_second, load.p50_ms(), load.p99_ms(),
            run.conflicts_per_write, run.calls, "yes" if run.exact else "NO",
        )  # fmt: skip
    table.notes += [
        f"{CLIENTS} threads share one boto3 client (Cairn's own configuration); each keeps its own head guess. "
        "All keys of a row sit beside one head, as they sit in one address.",
        "Lost transactions are stale head guesses (retried at once with the head from ALL_OLD) or a key that "
        "moved (a conflict: read again, like a client after a 409).",
    ]
    return table, results


def compare_cas_with_cairn(cairn: dict[str, CasRun], raw: dict[str, CasRun]) -> Table:
    """Cairn's HTTP compare-and-set writes/s as a share of the raw rate of the same shape."""
    table = Table(
        "State compare-and-set: Cairn over HTTP against the raw transaction",
        ["shape", "Cairn writes/s", "raw writes/s", "Cairn as % of raw", "Cairn conflicts per write",
         "raw conflicts per write"],
    )  # fmt: skip
    for shape in (HOT_KEY, OWN_KEYS):
        ours, theirs = cairn[shape], raw[shape]
        table.add(
            shape.replace("clients", "writers"), ours.load.per_second, theirs.load.per_second,
            round(100 * ours.load.per_second / theirs.load.per_second), ours.conflicts_per_write,
            theirs.conflicts_per_write,
        )  # fmt: skip
    table.notes.append(
        "A Cairn increment is two HTTP requests (GET, PUT) and, inside the server, two BatchGetItem reads of "
        "head, usage and key (the GET's and the PUT's) before its transaction; the raw one reads the key once."
    )
    return table
