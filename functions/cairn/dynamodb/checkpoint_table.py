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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.checkpoints.models import CheckpointRef, NewCheckpoint, Owner, Search, StoredCheckpoint, Write
from cairn.dynamodb import blobs, checkpoint_items, keys, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_s, key
from cairn.errors import CheckpointPartMissing, CheckpointStale, CheckpointThreadExists, Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

# Transactions that met another on the same items are sent again after a short random pause.
_ATTEMPTS = 8
_FAILED = "ConditionalCheckFailed"
_CONFLICT = "TransactionConflict"
HEAD = checkpoint_items.HEAD_ID
# A copy's puts per transaction beside its address check, and the bytes they may weigh (DynamoDB: 100, 4 MB).
MAX_PUTS = 99
_TRANSACTION_BYTES = 3_500_000
# Writes deleted in their checkpoint's own transaction (beside it, its head and a check); the rest go after it.
_DROP_WRITES = 96


class _Refused(Exception):
    """A condition of the transaction failed."""


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

    def put_writes(self, owner: Owner, checkpoint: CheckpointRef, writes: Sequence[Write], *, now: float) -> None:
        pending = list(writes)
        while pending:
            pending = self._write_once(owner, checkpoint, pending, now=now)

    def _write_once(self, owner: Owner, checkpoint: CheckpointRef, writes: list[Write], *, now: float) -> list[Write]:
        """Commit the writes; those still to send when some were stored before (they stay as they are)."""
        parts = list(dict.fromkeys(part for write in writes for part in write.value.parts))
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            *(checkpoint_items.write_put(self._table, owner, checkpoint, w) for w in writes),
            *(checkpoint_items.part_check(self._table, owner, checkpoint.thread_id, part) for part in parts),
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

    def _committed(self, actions: list[Item]) -> bool:
        """Send the transaction; False when a condition failed."""
        try:
            self._commit(actions, _refused)
        except _Refused:
            return False
        return True

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

    # -- copies, prunes and deletions by run -----------------------------------

    def copy_thread(self, owner: Owner, source_thread_id: str, target_thread_id: str, *, now: float) -> int:
        pk = keys.address_pk(owner.address_id)
        source_heads = keys.thread_heads_prefix(source_thread_id)
        # Each namespace as far as its head: what a later writer adds is not copied, so the copy's newest
        # checkpoint is its head. The heads' keys end in their namespace's digest, as their ranges do.
        heads = {
            item["sk"]["S"][len(source_heads) :]: get_s(item, HEAD) or ""
            for item in table_ops.query_range(
                self._client, self._table, pk, source_heads, keys.upper_bound(source_heads)
            )
        }
        if not heads:
            return 0  # nothing to copy, whatever the target holds
        target_heads = {keys.thread_heads_prefix(target_thread_id) + ns: head for ns, head in heads.items()}
        self._refuse_a_used_target(pk, target_thread_id, target_heads)
        source = keys.thread_checkpoints_prefix(source_thread_id)
        target = keys.thread_checkpoints_prefix(target_thread_id)
        ranges = (
            table_ops.query_range(
                self._client, self._table, pk, f"{source}{ns}#", keys.upper_bound(f"{source}{ns}#{head}#W#")
            )
            for ns, head in heads.items()
        )
        counted = _Counted(source, (item for items in ranges for item in items))
        # Each checkpoint after its writes and the heads last: until its head lands, no put continues the
        # copy, and a reader finds whole checkpoints only. Sending it again writes the same items.
        puts = (
            checkpoint_items.copied(item, owner, source, target, target_thread_id)
            for found, writes in checkpoint_items.grouped(counted)
            for item in (*writes, found)
        )
        parts: set[str] = set()
        for batch in _batches(self._table, puts):
            self._copy_parts(owner, source_thread_id, target_thread_id, batch, parts, now=now)
            self._commit([checkpoint_items.address_check(self._table, owner, now=now), *batch], _unauthorized)
        # The heads as copied: a deletion by run may have taken a head read above before its range was.
        head_puts = [
            checkpoint_items.copied_head(self._table, owner, keys.thread_heads_prefix(target_thread_id) + ns, head)
            for ns, head in counted.newest.items()
        ]
        for start in range(0, len(head_puts), MAX_PUTS):
            self._commit(
                [checkpoint_items.address_check(self._table, owner, now=now), *head_puts[start : start + MAX_PUTS]],
                lambda reasons: _used_target(reasons, target_thread_id),
            )
        return counted.checkpoints

    def _copy_parts(
        self, owner: Owner, source: str, target: str, batch: list[Item], done: set[str], *, now: float
    ) -> None:
        """The parts a batch of copied items names, under the target, before the batch commits."""
        for action in batch:
            for part in checkpoint_items.parts_of(action["Put"]["Item"]):
                if part in done:
                    continue
                data = self.read_part(owner.address_id, source, part)
                if data is None:
                    raise CheckpointPartMissing("A part of the source thread is gone: was it deleted?", parts=[part])
                self.put_part(owner, target, part, data, now=now)
                done.add(part)

    def _refuse_a_used_target(self, pk: str, target_thread_id: str, heads: dict[str, str]) -> None:
        """`CheckpointThreadExists` when the target has a head this copy would not give it (a retry's are its own)."""
        prefix = keys.thread_heads_prefix(target_thread_id)
        for item in table_ops.query_range(self._client, self._table, pk, prefix, keys.upper_bound(prefix)):
            if heads.get(item["sk"]["S"]) != get_s(item, HEAD):
                raise CheckpointThreadExists("The target thread has checkpoints already.", thread_id=target_thread_id)

    def prune(self, address_id: str, thread_id: str) -> int:
        """Keep the newest checkpoint of each namespace of the thread, and what its value is rebuilt from.

        Besides the newest, a namespace keeps the ancestors a LangGraph
        `DeltaChannel` replays (`checkpoint_items.delta_ancestors`); each
        checkpoint kept keeps its writes.
        """
        pk = keys.address_pk(address_id)
        prefix = keys.thread_checkpoints_prefix(thread_id)
        groups = list(checkpoint_items.grouped(self._outline(pk, prefix)))
        newest = {checkpoint_items.namespace_of(found): found for found, _ in groups}
        checkpoints = [found for found, _ in groups]
        kept = {
            item["sk"]["S"]
            for head in newest.values()
            for item in (head, *checkpoint_items.delta_ancestors(head, checkpoints))
        }
        dropped = 0
        for found, writes in groups:
            # A head on an older line moves to the newest checkpoint, the one readers take as the latest.
            replacement = newest[checkpoint_items.namespace_of(found)]
            if found["sk"]["S"] not in kept and self._drop(address_id, found, writes, replacement=replacement):
                dropped += 1
        return dropped

    def delete_for_runs(self, address_id: str, run_ids: frozenset[str]) -> int:
        """Remove every checkpoint (with its writes) whose metadata's `run_id` is one of `run_ids`, in every thread."""
        pk = keys.address_pk(address_id)
        groups = list(checkpoint_items.grouped(self._outline(pk, keys.thread_checkpoints_prefix(None))))
        doomed = {found["sk"]["S"] for found, _ in groups if checkpoint_items.run_of(found) in run_ids}
        # What a namespace's head moves to when its checkpoint goes: the newest one that stays.
        kept: dict[str, Item] = {}
        for found, _ in groups:
            if found["sk"]["S"] not in doomed:
                kept[checkpoint_items.head_key(address_id, found)["sk"]["S"]] = found
        dropped = 0
        for found, writes in reversed(groups):
            if found["sk"]["S"] in doomed:
                replacement = kept.get(checkpoint_items.head_key(address_id, found)["sk"]["S"])
                if not self._drop(address_id, found, writes, replacement=replacement):
                    raise Unavailable("Writers kept moving this thread during the deletion; retry shortly.")
                dropped += 1
        return dropped

    def _outline(self, pk: str, prefix: str) -> Iterator[Item]:
        """A range's checkpoints and writes without their values: what a prune or deletion decides on."""
        return table_ops.query_range(
            self._client,
            self._table,
            pk,
            prefix,
            keys.upper_bound(prefix),
            ProjectionExpression=(
                "pk, sk, thread_id, checkpoint_ns, checkpoint_id, parent_id, metadata, task_id, expires_at"
            ),
        )

    def _drop(self, address_id: str, found: Item, writes: list[Item], *, replacement: Item | None) -> bool:
        """Delete the checkpoint with its writes, keeping its thread's head on a checkpoint that is there.

        While the checkpoint is not the head, the head is only checked; when
        it is, the head moves to `replacement` (or goes) in the same commit.
        A writer that moved the head meanwhile is re-read once. Writes beyond
        one transaction go after their checkpoint: no reader shows them then.
        """
        inline, rest = writes[:_DROP_WRITES], writes[_DROP_WRITES:]
        for _ in range(2):
            head = self._client.get_item(
                TableName=self._table, Key=checkpoint_items.head_key(address_id, found), ConsistentRead=True
            ).get("Item")
            actions = [
                checkpoint_items.head_after_drop(self._table, address_id, found, get_s(head or {}, HEAD), replacement),
                *(checkpoint_items.delete(self._table, item) for item in (found, *inline)),
            ]
            if replacement is not None and get_s(head or {}, HEAD) == get_s(found, HEAD):
                actions.append(checkpoint_items.exists_check(self._table, replacement))
            if self._committed(actions):
                table_ops.batch_delete(
                    self._client,
                    self._table,
                    [{"pk": item["pk"], "sk": item["sk"]} for item in rest],
                    exhausted=lambda: Unavailable("Deletion is throttled; retry shortly."),
                )
                return True
        return False

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

    def writes_after(self, address_id: str, checkpoint: CheckpointRef, after: str) -> Iterator[Write]:
        sk = keys.checkpoint_sk(checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id)
        upper = keys.upper_bound(
            keys.checkpoint_writes_prefix(checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id)
        )
        if not sk <= after < upper:
            return
        for item in table_ops.query_range(self._client, self._table, keys.address_pk(address_id), after, upper):
            if item["sk"]["S"] != after and checkpoint_items.is_write(item):
                yield checkpoint_items.write_from(item)


def _failed(reasons: list[Item], index: int) -> bool:
    return index < len(reasons) and reasons[index].get("Code") == _FAILED


def _refused(reasons: list[Item]) -> None:
    raise _Refused()


def _unauthorized(reasons: list[Item]) -> None:
    raise Unauthorized()


def _used_target(reasons: list[Item], target_thread_id: str) -> None:
    if _failed(reasons, 0):
        raise Unauthorized()
    raise CheckpointThreadExists(
        "Another writer started the target thread during the copy.", thread_id=target_thread_id
    )


class _Counted(Iterator[Item]):
    """A thread's items read lazily, noting as they pass how many checkpoints, and each namespace's newest."""

    def __init__(self, prefix: str, items: Iterator[Item]) -> None:
        self._prefix = prefix
        self._items = items
        self.checkpoints = 0
        self.newest: dict[str, str] = {}  # the namespace's digest (as in its keys): checkpoint id

    def __next__(self) -> Item:
        item = next(self._items)
        if not checkpoint_items.is_write(item):
            self.checkpoints += 1
            namespace = item["sk"]["S"][len(self._prefix) :].split("#", 1)[0]
            self.newest[namespace] = get_s(item, HEAD) or ""
        return item


def _batches(table: str, items: Iterable[Item]) -> Iterator[list[Item]]:
    """Puts in transactions DynamoDB takes: under its action count and its 4 MB, beside the address check."""
    batch: list[Item] = []
    weight = 0
    for item in items:
        if batch and (len(batch) == MAX_PUTS or weight + checkpoint_items.item_bytes(item) > _TRANSACTION_BYTES):
            yield batch
            batch, weight = [], 0
        batch.append({"Put": {"TableName": table, "Item": item}})
        weight += checkpoint_items.item_bytes(item)
    if batch:
        yield batch


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
