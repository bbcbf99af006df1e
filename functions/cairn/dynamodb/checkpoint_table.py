"""`CheckpointStore` on the single table: a thread's items live in its address's partition.

A put is one transaction: the address's head checked (live, this token),
the thread's head moved under the condition the put claims, the
checkpoint's item put, the address's count of stored bytes moved by what
the item counts (`storage_usage`), and a check that each part it names is
there. A failed condition comes back with its reason (the thread's head as
it is, `ALL_OLD`), so a refusal needs no read. Every checkpoint, write and
part keeps what it counts (`COUNTED`), and whatever removes one releases
exactly that in its own transaction, under the condition that the item is
still there. A thread is deleted with its address, as every item of the
partition is.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.checkpoints.models import CheckpointRef, NewCheckpoint, Owner, Search, StoredCheckpoint, Write
from cairn.dynamodb import blobs, checkpoint_items, keys, storage_usage, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, get_s, key, n
from cairn.errors import CheckpointPartMissing, CheckpointStale, CheckpointThreadExists, Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

# Transactions that met another on the same items are sent again after a short random pause.
_ATTEMPTS = 8
_CONFLICT = "TransactionConflict"
HEAD = checkpoint_items.HEAD_ID
# A copy's head puts per transaction beside its address check, and the bytes a transaction may weigh
# (DynamoDB: 100 actions, 4 MB); its checkpoints and writes take one put fewer, for the count's update.
MAX_PUTS = 99
_TRANSACTION_BYTES = 3_500_000
# How long a part stays once a prune found that no checkpoint or write names it (`_collect_parts`).
ORPHAN_SECONDS = 300
# Writes deleted in their checkpoint's own transaction (beside it, its head, a check and the release of
# what they count); the rest go after it.
_DROP_WRITES = 96


class _Refused(Exception):
    """A condition of the transaction failed: `reasons` says which."""

    def __init__(self, reasons: list[Item]) -> None:
        super().__init__("refused")
        self.reasons = reasons


class Dropped(Enum):
    """How a checkpoint's deletion ended."""

    DROPPED = "dropped"  # this deletion removed it
    GONE = "gone"  # another deletion had removed it
    BUSY = "busy"  # writers kept moving its thread's head


class CheckpointTable:
    def __init__(
        self, client: DynamoDBClient, table: str, *, max_bytes: int, reclaim: storage_usage.Reclaim | None = None
    ) -> None:
        """`max_bytes`: what an address may store in all (files, sessions and these).

        `reclaim`: what gives a full address room back (see `storage_usage.with_room`).
        """
        self._client = client
        self._table = table
        self._max_bytes = max_bytes
        self._reclaim = reclaim

    # -- writes --------------------------------------------------------------

    def put(self, owner: Owner, checkpoint: NewCheckpoint, *, now: float) -> None:
        return storage_usage.with_room(self._reclaim, owner, now, lambda: self._put(owner, checkpoint, now=now))

    def _put(self, owner: Owner, checkpoint: NewCheckpoint, *, now: float) -> None:
        parts = list(dict.fromkeys(checkpoint.checkpoint.parts))
        stored = checkpoint_items.checkpoint_put(self._table, owner, checkpoint, now=now)
        growth = storage_usage.counted(stored["Put"]["Item"])
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            checkpoint_items.head_put(self._table, owner, checkpoint),
            stored,
            *self._charges(owner, growth),  # one: a checkpoint counts at least its row
            *(checkpoint_items.part_check(self._table, owner, checkpoint.thread_id, part) for part in parts),
        ]

        def refused(reasons: list[Item]) -> None:
            if table_ops.failed_at(reasons, 0):
                raise Unauthorized()
            if table_ops.failed_at(reasons, 1):
                head = get_s(reasons[1].get("Item") or {}, checkpoint_items.HEAD_ID)
                self._stale_unless_retry(checkpoint, head)
            elif table_ops.failed_at(reasons, 2):
                # The id is stored and the head condition held: an exact retry of a put that moved the head.
                head_key = checkpoint_items.thread_head_key(
                    owner.address_id, checkpoint.thread_id, checkpoint.checkpoint_ns
                )
                self._stale_unless_retry(checkpoint, self._head_id(head_key))
            elif table_ops.failed_at(reasons, 3):
                raise storage_usage.refusal(reasons[3], growth, max_bytes=self._max_bytes)
            else:
                missing = [part for index, part in enumerate(parts) if table_ops.failed_at(reasons, 4 + index)]
                raise CheckpointPartMissing(
                    "A part this checkpoint names is not uploaded, or a prune found it unnamed: upload it again.",
                    parts=missing,
                )

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

    def _head_id(self, head_key: Item) -> str | None:
        """The checkpoint a thread's head names now (None: the namespace has none)."""
        item = self._client.get_item(TableName=self._table, Key=head_key, ConsistentRead=True).get("Item")
        return get_s(item or {}, HEAD)

    def put_writes(self, owner: Owner, checkpoint: CheckpointRef, writes: Sequence[Write], *, now: float) -> None:
        return storage_usage.with_room(
            self._reclaim, owner, now, lambda: self._put_writes(owner, checkpoint, writes, now=now)
        )

    def _put_writes(self, owner: Owner, checkpoint: CheckpointRef, writes: Sequence[Write], *, now: float) -> None:
        pending = list(writes)
        for _ in range(_ATTEMPTS):
            pending = self._write_once(owner, checkpoint, pending, now=now)
            if not pending:
                return
        raise Unavailable("Writers kept replacing these writes; retry shortly.")

    def _write_once(self, owner: Owner, checkpoint: CheckpointRef, writes: list[Write], *, now: float) -> list[Write]:
        """Commit the writes; those still to send when some were stored before (they stay as they are).

        A special write (a negative index) replaces what its key holds: it
        is read first, so the count moves by the difference, and one that
        another writer replaced in between is sent again.
        """
        parts = list(dict.fromkeys(part for write in writes for part in write.value.parts))
        held = self._held_writes(owner.address_id, checkpoint, [write for write in writes if write.index < 0])
        puts = [
            checkpoint_items.write_put(
                self._table, owner, checkpoint, write, replaced=held.get(_write_sk(checkpoint, write))
            )
            for write in writes
        ]
        growth = sum(storage_usage.counted(put["Put"]["Item"]) for put in puts) - sum(
            storage_usage.counted(item) for item in held.values()
        )
        charges = self._charges(owner, growth)
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            *puts,
            *charges,
            *(checkpoint_items.part_check(self._table, owner, checkpoint.thread_id, part) for part in parts),
        ]
        first_part = len(actions) - len(parts)
        rest: list[Write] = []

        def refused(reasons: list[Item]) -> None:
            if table_ops.failed_at(reasons, 0):
                raise Unauthorized()
            missing = [part for index, part in enumerate(parts) if table_ops.failed_at(reasons, first_part + index)]
            if missing:
                raise CheckpointPartMissing(
                    "A part these writes name is not uploaded, or a prune found it unnamed: upload it again.",
                    parts=missing,
                )
            moved = [write for index, write in enumerate(writes) if table_ops.failed_at(reasons, 1 + index)]
            if not moved and charges and table_ops.failed_at(reasons, 1 + len(writes)):
                raise storage_usage.refusal(reasons[1 + len(writes)], growth, max_bytes=self._max_bytes)
            # A regular write found stored was sent before: it stays as it is. A special one was replaced.
            rest.extend(write for write in writes if write not in moved or write.index < 0)

        self._commit(actions, refused)
        return rest

    def _held_writes(self, address_id: str, checkpoint: CheckpointRef, writes: list[Write]) -> dict[str, Item]:
        """What the keys of these special writes hold now (their keys and `COUNTED`), by sort key."""
        if not writes:
            return {}
        found = table_ops.batch_get(
            self._client,
            self._table,
            [key(keys.address_pk(address_id), _write_sk(checkpoint, write)) for write in writes],
            exhausted=lambda: Unavailable("Reads are throttled; retry shortly."),
            ProjectionExpression="pk, sk, #counted",
            ExpressionAttributeNames={"#counted": storage_usage.COUNTED},
        )
        return {item["sk"]["S"]: item for item in found}

    def _charges(self, owner: Owner, growth: int) -> list[Item]:
        """The count's update for a write that moves it by `growth`, when it moves it (in a list: one or none).

        `StorageLimitExceeded` at once when `growth` is more than any count could take.
        """
        charge = storage_usage.charge(
            self._table, owner.address_id, growth, max_bytes=self._max_bytes, expiry=checkpoint_items.expiry(owner)
        )
        return [] if charge is None else [charge]

    def put_part(self, owner: Owner, thread_id: str, digest: str, data: bytes, *, now: float) -> None:
        return storage_usage.with_room(
            self._reclaim, owner, now, lambda: self._put_part(owner, thread_id, digest, data, now=now)
        )

    def _put_part(self, owner: Owner, thread_id: str, digest: str, data: bytes, *, now: float) -> None:
        # Named by its digest: a part already there holds these bytes, and is left as it is.
        part, *pieces = checkpoint_items.part_items(owner, thread_id, digest, data)
        growth = storage_usage.counted(part)
        actions = [
            checkpoint_items.address_check(self._table, owner, now=now),
            {"Put": {"TableName": self._table, "Item": part, "ConditionExpression": "attribute_not_exists(pk)"}},
            *self._charges(owner, growth),
            *({"Put": {"TableName": self._table, "Item": piece}} for piece in pieces),
        ]

        def refused(reasons: list[Item]) -> None:
            if table_ops.failed_at(reasons, 0):
                raise Unauthorized()
            if table_ops.failed_at(reasons, 1):
                # Uploaded again: a part a prune found unnamed is kept, and may be named again (`_collect_parts`).
                self._update_part(part, "REMOVE #orphaned", "attribute_exists(#orphaned)")
            elif table_ops.failed_at(reasons, 2):
                raise storage_usage.refusal(reasons[2], growth, max_bytes=self._max_bytes)

        self._commit(actions, refused)

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
        # Checkpoints, writes and parts release what they count; a part's pieces are counted on the part.
        for prefix, counts in (
            (keys.thread_heads_prefix(thread_id), False),
            (keys.thread_checkpoints_prefix(thread_id), True),
            (keys.thread_parts_prefix(thread_id), True),
            (keys.thread_part_pieces_prefix(thread_id), False),
        ):
            if counts:
                storage_usage.delete_counted(
                    self._client, self._table, address_id, list(self._outline(pk, prefix)), exhausted=_throttled
                )
            else:
                table_ops.delete_partition(
                    self._client, self._table, pk, prefix, keys.upper_bound(prefix), exhausted=_throttled
                )

    # -- copies, prunes and deletions by run -----------------------------------

    def copy_thread(self, owner: Owner, source_thread_id: str, target_thread_id: str, *, now: float) -> int:
        return storage_usage.with_room(
            self._reclaim, owner, now, lambda: self._copy_thread(owner, source_thread_id, target_thread_id, now=now)
        )

    def _copy_thread(self, owner: Owner, source_thread_id: str, target_thread_id: str, *, now: float) -> int:
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
        # copy, and a reader finds whole checkpoints only. Sent again, it skips what it put before.
        puts = (
            checkpoint_items.copied(item, owner, source, target, target_thread_id)
            for found, writes in checkpoint_items.grouped(counted)
            for item in (*writes, found)
        )
        parts: set[str] = set()
        for batch in _batches(self._table, puts):
            self._copy_parts(owner, source_thread_id, target_thread_id, batch, parts, now=now)
            self._put_copies(owner, batch, now=now)
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

    def _put_copies(self, owner: Owner, puts: list[Item], *, now: float) -> None:
        """Put a copy's items where the target has none: one already there was put by this copy, sent before."""
        for _ in range(_ATTEMPTS):
            growth = sum(storage_usage.counted(put["Put"]["Item"]) for put in puts)
            actions = [checkpoint_items.address_check(self._table, owner, now=now), *puts]
            try:
                self._commit([*actions, *self._charges(owner, growth)], _refused)
                return
            except _Refused as refused:
                reasons = refused.reasons
            if table_ops.failed_at(reasons, 0):
                raise Unauthorized()
            # A put refused was sent before; none refused means the count refused the batch.
            left = [put for index, put in enumerate(puts) if not table_ops.failed_at(reasons, 1 + index)]
            if len(left) == len(puts):
                raise storage_usage.refusal(reasons[1 + len(puts)], growth, max_bytes=self._max_bytes)
            puts = left
            if not puts:
                return
        raise Unavailable("Writers kept moving the target thread; retry shortly.")

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

    def prune(self, address_id: str, thread_id: str, *, now: float) -> int:
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
            if found["sk"]["S"] in kept:
                continue
            if self._drop(address_id, found, writes, replacement=replacement) is Dropped.DROPPED:
                dropped += 1
        self._collect_parts(address_id, thread_id, now=now)
        return dropped

    def delete_for_runs(self, address_id: str, run_ids: frozenset[str], *, now: float) -> int:
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
                outcome = self._drop(address_id, found, writes, replacement=replacement)
                if outcome is Dropped.BUSY:
                    raise Unavailable("Writers kept moving this thread during the deletion; retry shortly.")
                if outcome is Dropped.DROPPED:
                    dropped += 1
        for thread_id in {get_s(found, "thread_id") or "" for found, _ in groups if found["sk"]["S"] in doomed}:
            self._collect_parts(address_id, thread_id, now=now)
        return dropped

    def _collect_parts(self, address_id: str, thread_id: str, *, now: float) -> None:
        """Remove the thread's parts that no checkpoint or write has named for `ORPHAN_SECONDS`, releasing them.

        A part found unnamed is marked with the time (`ORPHANED_AT`), and no
        put names a marked part (`part_check`): uploading it again clears the
        mark. Once marked, nothing names it again unless uploaded anew, so
        one still unnamed and marked at least `ORPHAN_SECONDS` ago goes, with
        its pieces, in one transaction under the condition that its mark is
        the one read. A reader that read a checkpoint before the prune that
        removed it has those seconds to read its parts.
        """
        pk = keys.address_pk(address_id)
        prefix = keys.thread_parts_prefix(thread_id)
        parts = list(
            table_ops.query_range(
                self._client,
                self._table,
                pk,
                prefix,
                keys.upper_bound(prefix),
                ProjectionExpression="pk, sk, #counted, #pieces, #orphaned",
                ExpressionAttributeNames={
                    "#counted": storage_usage.COUNTED,
                    "#pieces": blobs.PIECES,
                    "#orphaned": checkpoint_items.ORPHANED_AT,
                },
            )
        )
        if not parts:
            return
        named = self._named_parts(pk, thread_id)
        marked = []
        for part in parts:
            orphaned = part.get(checkpoint_items.ORPHANED_AT)
            if _digest(part, prefix) in named:
                if orphaned is not None:
                    self._unmark(part, orphaned)
            elif orphaned is None:
                if self._update_part(part, "SET #orphaned = :mark", "attribute_not_exists(#orphaned)", mark=n(now)):
                    marked.append(part)
            elif float(orphaned["N"]) <= now - ORPHAN_SECONDS:
                self._remove_part(address_id, part)
        if marked:
            # A put may have named one between the listing and its mark: that one is kept after all.
            named = self._named_parts(pk, thread_id)
            for part in marked:
                if _digest(part, prefix) in named:
                    self._unmark(part, n(now))

    def _named_parts(self, pk: str, thread_id: str) -> set[str]:
        prefix = keys.thread_checkpoints_prefix(thread_id)
        found = table_ops.query_range(
            self._client,
            self._table,
            pk,
            prefix,
            keys.upper_bound(prefix),
            ProjectionExpression="#parts",
            ExpressionAttributeNames={"#parts": checkpoint_items.PARTS},
        )
        return {part for item in found for part in checkpoint_items.parts_of(item)}

    def _unmark(self, part: Item, mark: Item) -> None:
        self._update_part(part, "REMOVE #orphaned", "#orphaned = :mark", mark=mark)

    def _update_part(self, part: Item, update: str, condition: str, *, mark: Item | None = None) -> bool:
        """Set or clear a part's `ORPHANED_AT` under `condition`; False when another prune or an upload came first."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"pk": part["pk"], "sk": part["sk"]},
            "UpdateExpression": update,
            "ConditionExpression": f"attribute_exists(pk) AND {condition}",
            "ExpressionAttributeNames": {"#orphaned": checkpoint_items.ORPHANED_AT},
        }
        if mark is not None:
            request["ExpressionAttributeValues"] = {":mark": mark}
        try:
            self._client.update_item(**request)
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _remove_part(self, address_id: str, part: Item) -> None:
        """Delete a part with its pieces, releasing what it counted, while its mark is still the one read."""
        freed = storage_usage.counted(part)
        actions = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": {"pk": part["pk"], "sk": part["sk"]},
                    "ConditionExpression": "#orphaned = :was",
                    "ExpressionAttributeNames": {"#orphaned": checkpoint_items.ORPHANED_AT},
                    "ExpressionAttributeValues": {":was": part[checkpoint_items.ORPHANED_AT]},
                }
            },
            *(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": key(part["pk"]["S"], keys.payload_chunk_sk(part["sk"]["S"], index)),
                    }
                }
                for index in range(get_int(part, blobs.PIECES))
            ),
            *([storage_usage.release(self._table, address_id, freed)] if freed else []),
        ]
        try:
            table_ops.transact_write(self._client, actions)
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise  # else uploaded again, or removed by another prune: it stays, or is gone, as it should

    def _outline(self, pk: str, prefix: str) -> Iterator[Item]:
        """A range's items without their values: what a prune or deletion decides on, and what each counts."""
        return table_ops.query_range(
            self._client,
            self._table,
            pk,
            prefix,
            keys.upper_bound(prefix),
            ProjectionExpression=(
                "pk, sk, thread_id, checkpoint_ns, checkpoint_id, parent_id, metadata, task_id, expires_at, #counted"
            ),
            ExpressionAttributeNames={"#counted": storage_usage.COUNTED},
        )

    def _drop(self, address_id: str, found: Item, writes: list[Item], *, replacement: Item | None) -> Dropped:
        """Delete the checkpoint with its writes, keeping its thread's head on a checkpoint that is there.

        While the checkpoint is not the head, the head is only checked; when
        it is, the head moves to `replacement` (or goes) in the same commit,
        which also releases what the items removed counted. A writer that
        moved the head meanwhile is re-read; a write another deletion took
        is left out. Writes beyond one transaction go after their
        checkpoint: no reader shows them then.
        """
        inline, rest = writes[:_DROP_WRITES], writes[_DROP_WRITES:]
        for _ in range(3):
            head = self._head_id(checkpoint_items.head_key(address_id, found))
            doomed = [found, *inline]
            freed = sum(storage_usage.counted(item) for item in doomed)
            actions = [
                checkpoint_items.head_after_drop(self._table, address_id, found, head, replacement),
                *(storage_usage.counted_deletion(self._table, item) for item in doomed),
                *([storage_usage.release(self._table, address_id, freed)] if freed else []),
            ]
            if replacement is not None and head == get_s(found, HEAD):
                actions.append(checkpoint_items.exists_check(self._table, replacement))
            try:
                self._commit(actions, _refused)
            except _Refused as refused:
                # Taken by another deletion, or going with its address (whose count its release found gone).
                address_gone = bool(freed) and storage_usage.count_gone(refused.reasons, 1 + len(doomed))
                if table_ops.failed_at(refused.reasons, 1) or address_gone:
                    return Dropped.GONE
                inline = [
                    item for index, item in enumerate(inline) if not table_ops.failed_at(refused.reasons, 2 + index)
                ]
                continue
            storage_usage.delete_counted(self._client, self._table, address_id, rest, exhausted=_throttled)
            return Dropped.DROPPED
        return Dropped.BUSY

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


def _refused(reasons: list[Item]) -> None:
    raise _Refused(reasons)


def _throttled() -> Exception:
    return Unavailable("Deletion is throttled; retry shortly.")


def _digest(part: Item, prefix: str) -> str:
    """The SHA-256 a part is named by, from its key under its thread's `prefix`."""
    return str(part["sk"]["S"])[len(prefix) :]


def _write_sk(checkpoint: CheckpointRef, write: Write) -> str:
    return keys.checkpoint_write_sk(
        checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id, write.task_id, write.index
    )


def _used_target(reasons: list[Item], target_thread_id: str) -> None:
    if table_ops.failed_at(reasons, 0):
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
    """Puts of items not there yet, in transactions DynamoDB takes beside the address check and the count's update:
    under its action count and its 4 MB."""
    batch: list[Item] = []
    weight = 0
    for item in items:
        if batch and (len(batch) == MAX_PUTS - 1 or weight + checkpoint_items.item_bytes(item) > _TRANSACTION_BYTES):
            yield batch
            batch, weight = [], 0
        batch.append({"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}})
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
