"""The inbox append's transaction in raw boto3: what DynamoDB Local allows at best.

Each append is one `TransactWriteItems`: an Update of a head item that moves
`last_seq` from N to N+1 only if it is still N, and a Put of the event. A
writer guesses N from its own last write and, when another writer moved the
head, learns the new N from the cancellation (ALL_OLD) and retries at once.
This is Cairn's protocol without HTTP, the resolver or credentials.

Each shape runs twice: with the idempotency record a post with an
Idempotency-Key writes (the same actions as the post), and without.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from bench.report import Table
from bench.timing import run_load
from cairn.dynamodb.address_table import CONDITION_FAILED
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, key, n, s

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

THREADS = 8

RAW_1_TO_1 = "1 thread, 1 head"
RAW_8_TO_1 = f"{THREADS} threads, 1 head"
RAW_8_TO_8 = f"{THREADS} threads, {THREADS} heads"
# Writer threads and head items of each shape.
SHAPES = {RAW_1_TO_1: (1, 1), RAW_8_TO_1: (THREADS, 1), RAW_8_TO_8: (THREADS, THREADS)}


class ExtraConditionFailed(Exception):
    """A condition of the caller's own actions failed: a real conflict, not a stale guess."""


class RawAppender:
    """One writer with its own sequence guess; counts its transactions."""

    def __init__(self, client: DynamoDBClient, table: str, head: str) -> None:
        self._client = client
        self._table = table
        self.head = head
        self._last = 0
        self.transactions = 0

    def append(self, extra: Sequence[dict[str, Any]] = ()) -> str:
        """Append one event, with `extra` actions (after the head and the event) in the same transaction."""
        while True:
            self.transactions += 1
            own = self._actions()
            try:
                self._client.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", [*own, *extra]))
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(error)
                head = reasons[0].get("Item")
                if head:
                    # A stale guess: the cancellation carries the current head.
                    self._last = get_int(head, "last_seq")
                elif any(reason.get("Code") == CONDITION_FAILED for reason in reasons[len(own) :]):
                    raise ExtraConditionFailed() from error
                # Otherwise the cancellation was a conflict with another transaction: try again.
                continue
            self._last += 1
            return "ok"

    def _actions(self) -> list[dict[str, Any]]:
        sequence = self._last + 1
        return [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(self.head, "META"),
                    "UpdateExpression": "SET last_seq = :new",
                    "ConditionExpression": "last_seq = :last",
                    "ExpressionAttributeValues": {":new": n(sequence), ":last": n(self._last)},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {**key(self.head, f"E#{sequence:012d}"), "data": s('{"n":1}')},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]


@dataclass(frozen=True)
class RawWork:
    """One kind of raw transaction the posts are read against."""

    label: str
    # The post's idempotency record: a Put of its own key beside the head and the event.
    idempotency_record: bool


# The actions a post with an Idempotency-Key commits, and the fewest an append can take.
SAME_ACTIONS = RawWork("head + event + idempotency record, as a post", True)
FEWEST_ACTIONS = RawWork("head + event", False)
# The fewest first, as they ran before the idempotency record was added.
WORKS = (FEWEST_ACTIONS, SAME_ACTIONS)


def raw_name(work: RawWork, shape: str) -> str:
    return f"{shape}, {work.label}"


def measure_baseline(client: DynamoDBClient, table_name: str, seconds: float, warmup: float) -> Table:
    table = Table(
        f"Baseline: raw boto3 TransactWriteItems on DynamoDB Local ({seconds:g} s per row)",
        ["scenario", "appends", "appends/s", "p50 ms", "p99 ms", "transactions per append"],
    )
    for work_number, work in enumerate(WORKS):
        for number, (shape, (threads, heads)) in enumerate(SHAPES.items()):
            writers = raw_writers(client, table_name, f"BENCH#{work_number}#{number}", threads, heads)
            appends = [appending(writer, table_name, work) for writer in writers]
            run_load(appends, warmup)
            for writer in writers:
                writer.transactions = 0
            result = run_load(appends, seconds)
            transactions = sum(writer.transactions for writer in writers)
            table.add(
                raw_name(work, shape), result.operations, result.per_second, result.p50_ms(), result.p99_ms(),
                round(transactions / result.operations, 2),
            )  # fmt: skip
    table.notes += [
        "One boto3 client (Cairn's own configuration) shared by the threads; each thread keeps its own guess.",
        "The table has no stream; `cairn serve`'s has one, for wake-ups (see the note under the comparison).",
    ]
    return table


def raw_writers(client: DynamoDBClient, table_name: str, prefix: str, threads: int, heads: int) -> list[RawAppender]:
    """`threads` writers on `heads` new head items (keys from `prefix`), shared in turn."""
    head_keys = [f"{prefix}#{index}" for index in range(heads)]
    for head in head_keys:
        client.put_item(TableName=table_name, Item={**key(head, "META"), "last_seq": n(0)})
    return [RawAppender(client, table_name, head_keys[index % heads]) for index in range(threads)]


def appending(writer: RawAppender, table_name: str, work: RawWork) -> Callable[[], str]:
    """One append of `work`'s shape by `writer`, for `run_load`."""
    if not work.idempotency_record:
        return writer.append
    numbers = itertools.count()

    def append() -> str:
        record = {**key(f"BENCH#IDEMPOTENCY#{uuid.uuid4()}", "IDEMPOTENCY"), "n": n(next(numbers))}
        return writer.append([{"Put": {"TableName": table_name, "Item": record,
                                       "ConditionExpression": "attribute_not_exists(pk)"}}])  # fmt: skip

    return append
