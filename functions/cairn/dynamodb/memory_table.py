"""Product memory in the single table: one partition per agent run.

  M#<agent>#<run>  META          the last sequence
                   E#<seq>       one event: type, time, labels, data (or its piece count)

A large event's data is split into pieces the way `blobs` splits every
payload; events written before that kept theirs right after the event
(`E#<seq>#<n>`), where they are still read.

An append is one `TransactWriteItems`: the head moves from N to N+k only if
it still is N, and the k events are created beside it, all or nothing. The
writer guesses N from its last append; a stale guess comes back with the
current head (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so no read
precedes the write and concurrent writers never lose or reorder an event.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn import jsontext
from cairn.dynamodb import blobs, keys, memory_items, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, key, n
from cairn.errors import PayloadTooLarge, Unavailable
from cairn.transcript.memory import MAX_EVENTS_PER_APPEND, MemoryEvent, MemoryPage

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_APPEND_BUDGET_SECONDS = 10.0
_HINT_CAPACITY = 50_000
# DynamoDB's limits for one transaction; the byte count is a safe estimate.
MAX_TRANSACTION_ITEMS = MAX_EVENTS_PER_APPEND + 1
MAX_TRANSACTION_BYTES = 4_000_000


class MemoryTable:
    """Storage of memory events; see the module docstring for the protocol."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self._hints: dict[str, int] = {}
        self._hints_lock = threading.Lock()

    def append(self, agent_id: str, run_id: str, events: Sequence[MemoryEvent]) -> list[int]:
        """Commit `events` after the run's last event; their sequences.

        Losing a race is normal on a busy run: the loser learns the new head
        and tries again after a growing random pause, until
        `_APPEND_BUDGET_SECONDS` have passed.
        """
        pk = keys.memory_pk(agent_id, run_id)
        encoded = [memory_items.EncodedEvent.of(event) for event in events]
        _check_fits_one_transaction(encoded)
        last = self._hints.get(pk, 0)
        deadline = time.monotonic() + _APPEND_BUDGET_SECONDS
        attempt = 0
        while True:
            try:
                table_ops.transact_write(self._client, self._actions(pk, encoded, last))
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(error)
                head = reasons[0] if reasons else {}
                if head.get("Code") == "ConditionalCheckFailed":
                    last = get_int(head.get("Item") or {}, "last_seq")
                attempt += 1
                if time.monotonic() >= deadline:
                    raise Unavailable("This run's memory is too busy right now; retry shortly.") from error
                time.sleep(random.uniform(0, 0.001 * min(2**attempt, 50)))
                continue
            self._remember(pk, last + len(events))
            return list(range(last + 1, last + len(events) + 1))

    def _actions(self, pk: str, encoded: list[memory_items.EncodedEvent], last: int) -> list[dict[str, Any]]:
        head: dict[str, Any] = {
            "TableName": self._table,
            "Key": key(pk, keys.META),
            "UpdateExpression": "SET last_seq = :new",
            "ExpressionAttributeValues": {":new": n(last + len(encoded))},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if last:
            head["ConditionExpression"] = "last_seq = :last"
            head["ExpressionAttributeValues"][":last"] = n(last)
        else:
            head["ConditionExpression"] = "attribute_not_exists(pk)"
        puts = [
            {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
            for sequence, event in enumerate(encoded, start=last + 1)
            for item in event.items(pk, sequence)
        ]
        return [{"Update": head}, *puts]

    def list_events(
        self, agent_id: str, run_id: str, *, after: int, limit: int | None, max_bytes: int | None
    ) -> MemoryPage:
        """Events after sequence `after`, oldest first, at most `limit` and (but
        for the first) `max_bytes` of data; `has_more` when more remain."""
        events: list[MemoryEvent] = []
        size = 0
        pk = keys.memory_pk(agent_id, run_id)
        items = table_ops.query_range(
            self._client, self._table, pk, keys.event_sk(after + 1), keys.events_upper_bound()
        )
        for item in items:
            if "seq" not in item:
                continue  # a piece of an event written in the former layout, read with its event
            if events and limit is not None and len(events) == limit:
                return MemoryPage(events=events, has_more=True)
            legacy = keys.legacy_memory_chunk_prefix(get_int(item, "seq"))
            data = blobs.read(self._client, self._table, item, legacy_prefix=legacy) or b""
            # Measured as Lambda carries it: escaping can make text several times its stored size.
            size += jsontext.sent_size(data.decode("utf-8", "replace")) + memory_items.sent_beside_data(item)
            if events and max_bytes is not None and size > max_bytes:
                return MemoryPage(events=events, has_more=True)
            events.append(memory_items.event_from_item(item, data))
        return MemoryPage(events=events)

    def _remember(self, pk: str, last: int) -> None:
        with self._hints_lock:
            if len(self._hints) >= _HINT_CAPACITY:
                self._hints.clear()
            self._hints[pk] = max(last, self._hints.get(pk, 0))


def _check_fits_one_transaction(encoded: list[memory_items.EncodedEvent]) -> None:
    for event in encoded:
        beside = len(event.labels.encode()) + len(event.event.type.encode())
        if beside > memory_items.MAX_BESIDE_DATA_BYTES:
            raise PayloadTooLarge(
                f"An event's labels (as JSON) and type take at most {memory_items.MAX_BESIDE_DATA_BYTES} bytes: "
                "they are stored in one item beside the data.",
                bytes=beside,
                max_bytes=memory_items.MAX_BESIDE_DATA_BYTES,
            )
    count = 1 + sum(event.item_count for event in encoded)
    size = sum(event.size for event in encoded)
    if count > MAX_TRANSACTION_ITEMS or size > MAX_TRANSACTION_BYTES:
        raise PayloadTooLarge(
            "An append is written as one DynamoDB transaction: at most "
            f"{MAX_TRANSACTION_ITEMS - 1} items (an event with more than {blobs.INLINE_BYTES} bytes of data takes "
            f"one more item per {blobs.INLINE_BYTES} bytes) and about {MAX_TRANSACTION_BYTES} bytes; "
            "split it into several appends.",
            items=count,
            bytes=size,
        )
