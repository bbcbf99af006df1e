"""`CheckpointStore` on the single table: a thread's items live in its address's partition.

A put is one transaction: the address's head checked (live, this token),
the thread's head moved under the condition the put claims, the
checkpoint's item put, and a check that each part it names is there. A
failed condition comes back with its reason (the thread's head as it is,
`ALL_OLD`), so a refusal needs no read. A thread is deleted with its
address, as every item of the partition is.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.checkpoints.models import NewCheckpoint, Owner, Search, StoredCheckpoint, Write
from cairn.dynamodb import blobs, checkpoint_items, keys, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_s, key
from cairn.errors import CheckpointPartMissing, CheckpointStale, Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

# Transactions that met another on the same items are sent again after a short random pause.
_ATTEMPTS = 8
_FAILED = "ConditionalCheckFailed"
_CONFLICT = "TransactionConflict"


class _Conflict(Exception):
    """Another transaction held one of the items: send again."""


class CheckpointTable:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    # -- writes --------------------------------------------------------------

    def put(self, owner: Owner, checkpoint: NewCheckpoint, *, now: float) -> None:
        parts = list(dict.fromkeys(checkpoint.checkpoint.parts))
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            checkpoint_items.head_put(self._table, owner, checkpoint),
            checkpoint_items.checkpoint_put(self._table, owner, checkpoint, now=now),
            *(checkpoint_items.part_check(self._table, owner, checkpoint.thread_id, part) for part in parts),
        ]

        def refused(reasons: list[Item]) -> None:
            if _failed(reasons, 0):
                raise Unauthorized()
            if _failed(reasons, 1):
                head = get_s(reasons[1].get("Item") or {}, checkpoint_items.HEAD_ID)
                self._stale_unless_retry(checkpoint, head)
            elif _failed(reasons, 2):
                # The id is stored and the head condition held: an exact retry of a put that moved the head.
                self._stale_unless_retry(checkpoint, self._head(owner.address_id, checkpoint))
            else:
                missing = [part for index, part in enumerate(parts) if _failed(reasons, 3 + index)]
                raise CheckpointPartMissing("A part this checkpoint names is not uploaded.", parts=missing)

        self._commit(actions, refused)

    def _stale_unless_retry(self, checkpoint: NewCheckpoint, head: str | None) -> None:
        if head == checkpoint.checkpoint_id:
            return
        raise CheckpointStale(
            "Another writer moved this thread on: the checkpoint this one continues is no longer its head.",
            thread_id=checkpoint.thread_id,
            checkpoint_ns=checkpoint.checkpoint_ns,
            parent_id=checkpoint.parent_id,
            head=head,
        )

    def _head(self, address_id: str, checkpoint: NewCheckpoint) -> str | None:
        item = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.thread_head_sk(checkpoint.thread_id, checkpoint.checkpoint_ns)),
            ConsistentRead=True,
        ).get("Item")
        return get_s(item or {}, checkpoint_items.HEAD_ID)

    def put_writes(
        self,
        owner: Owner,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[Write],
        *,
        now: float,
    ) -> None:
        pending = list(writes)
        while pending:
            pending = self._write_once(owner, thread_id, checkpoint_ns, checkpoint_id, pending, now=now)

    def _write_once(
        self, owner: Owner, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: list[Write], *, now: float
    ) -> list[Write]:
        """Commit the writes; those still to send when some were stored before (they stay as they are)."""
        parts = list(dict.fromkeys(part for write in writes for part in write.value.parts))
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            *(
                checkpoint_items.write_put(self._table, owner, thread_id, checkpoint_ns, checkpoint_id, w)
                for w in writes
            ),
            *(checkpoint_items.part_check(self._table, owner, thread_id, part) for part in parts),
        ]
        rest: list[Write] = []

        def refused(reasons: list[Item]) -> None:
            if _failed(reasons, 0):
                raise Unauthorized()
            missing = [part for index, part in enumerate(parts) if _failed(reasons, 1 + len(writes) + index)]
            if missing:
                raise CheckpointPartMissing("A part these writes name is not uploaded.", parts=missing)
            rest.extend(write for index, write in enumerate(writes) if not _failed(reasons, 1 + index))

        self._commit(actions, refused)
        return rest

    def put_part(self, owner: Owner, thread_id: str, digest: str, data: bytes, *, now: float) -> None:
        # Named by its digest: writing it again writes the same bytes.
        puts = [
            {"Put": {"TableName": self._table, "Item": item}}
            for item in checkpoint_items.part_items(owner, thread_id, digest, data)
        ]
        self._commit([checkpoint_items.address_check(self._table, owner, now=now), *puts], _unauthorized)

    def _commit(self, actions: list[Item], refused: Callable[[list[Item]], None]) -> None:
        """Send the transaction; `refused` decides a failed condition, a conflict is sent again."""
        for attempt in range(_ATTEMPTS):
            try:
                table_ops.transact_write(self._client, actions)
                return
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(error)
                if any(reason.get("Code") == _CONFLICT for reason in reasons):
                    time.sleep(random.uniform(0, 0.005 * 2**attempt))
                    continue
                refused(reasons)
                return
        raise Unavailable("The thread is too busy right now; retry shortly.")

    def delete_thread(self, address_id: str, thread_id: str) -> None:
        pk = keys.address_pk(address_id)
        # The heads first: a put racing the deletion then finds no head to continue and is refused.
        for prefix in (
            keys.thread_heads_prefix(thread_id),
            keys.thread_checkpoints_prefix(thread_id),
            keys.thread_parts_prefix(thread_id),
            keys.thread_part_pieces_prefix(thread_id),
        ):
            table_ops.delete_partition(
                self._client,
                self._table,
                pk,
                prefix,
                keys.upper_bound(prefix),
                exhausted=lambda: Unavailable("Deletion is throttled; retry shortly."),
            )

    # -- reads ---------------------------------------------------------------

    def read_part(self, address_id: str, thread_id: str, digest: str) -> bytes | None:
        sk = keys.thread_part_sk(thread_id, digest)
        item = self._client.get_item(
            TableName=self._table, Key=key(keys.address_pk(address_id), sk), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return blobs.read(self._client, self._table, item, legacy_prefix=keys.payload_chunk_prefix(sk))

    def checkpoints(self, address_id: str, search: Search) -> Iterator[StoredCheckpoint]:
        pk = keys.address_pk(address_id)
        if search.checkpoint_id is not None:
            yield from self._one(pk, search)
            return
        if search.thread_id is None:
            prefix = keys.thread_checkpoints_prefix(None)
        elif search.checkpoint_ns is None:
            prefix = keys.thread_checkpoints_prefix(search.thread_id)
        else:
            prefix = keys.namespace_checkpoints_prefix(search.thread_id, search.checkpoint_ns)
        upper = keys.upper_bound(prefix)
        if search.before is not None and search.checkpoint_ns is not None:
            upper = prefix + search.before  # the checkpoint itself is skipped below; its writes sort above it
        if search.after is not None:
            upper = min(upper, search.after)
        if upper < prefix:
            return
        # A few items per checkpoint asked for (it and its writes), so the latest costs a small read; more come lazily.
        page_size = None if search.limit is None else min(max(4 * search.limit, 16), 200)
        items = table_ops.query_range(
            self._client, self._table, pk, prefix, upper, ScanIndexForward=False, page_size=page_size
        )
        yield from _assembled(items, skip=lambda item: _skipped(item, search, upper))

    def _one(self, pk: str, search: Search) -> Iterator[StoredCheckpoint]:
        assert search.thread_id is not None and search.checkpoint_ns is not None and search.checkpoint_id is not None
        sk = keys.checkpoint_sk(search.thread_id, search.checkpoint_ns, search.checkpoint_id)
        writes_prefix = keys.checkpoint_writes_prefix(search.thread_id, search.checkpoint_ns, search.checkpoint_id)
        items = list(table_ops.query_range(self._client, self._table, pk, sk, keys.upper_bound(writes_prefix)))
        if items and items[0]["sk"]["S"] == sk:
            yield checkpoint_items.checkpoint_from(items[0], [checkpoint_items.write_from(item) for item in items[1:]])

    def writes_after(
        self, address_id: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str, after: str
    ) -> Iterator[Write]:
        prefix = keys.checkpoint_writes_prefix(thread_id, checkpoint_ns, checkpoint_id)
        upper = keys.upper_bound(prefix)
        if not keys.checkpoint_sk(thread_id, checkpoint_ns, checkpoint_id) <= after < upper:
            return
        for item in table_ops.query_range(self._client, self._table, keys.address_pk(address_id), after, upper):
            if item["sk"]["S"] != after and checkpoint_items.is_write(item):
                yield checkpoint_items.write_from(item)


def _failed(reasons: list[Item], index: int) -> bool:
    return index < len(reasons) and reasons[index].get("Code") == _FAILED


def _unauthorized(reasons: list[Item]) -> None:
    raise Unauthorized()


def _skipped(item: Item, search: Search, upper: str) -> bool:
    """A checkpoint the range holds but the search leaves out: the page's bound, or not before `before`."""
    if item["sk"]["S"] == upper:
        return True
    return search.before is not None and (get_s(item, "checkpoint_id") or "") >= search.before


def _assembled(items: Iterator[Item], *, skip: Callable[[Item], bool]) -> Iterator[StoredCheckpoint]:
    """Checkpoints with their writes from a newest-first range, where each checkpoint's writes come just before it.

    Writes whose checkpoint is not there (a put refused after they were
    stored) belong to no answer.
    """
    writes: list[Write] = []
    for item in items:
        if checkpoint_items.is_write(item):
            writes.append(checkpoint_items.write_from(item))
            continue
        own = [write for write in writes if write.position.startswith(item["sk"]["S"] + "#")]
        writes = []
        if not skip(item):
            yield checkpoint_items.checkpoint_from(item, list(reversed(own)))
