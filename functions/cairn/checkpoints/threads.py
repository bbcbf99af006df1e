"""LangGraph checkpoints of an address (its read token): put, writes, search, parts, thread deletion.

Each thread (a thread id and a checkpoint namespace) has a head, the
checkpoint it is at. A put that continues a checkpoint commits only while
that checkpoint is still the head, in the same commit as the checkpoint
itself: of two writers resuming a thread from one checkpoint, one commits
and the other is refused with `CheckpointStale`, so a thread's history is
one chain. Values travel as their serializer made them (a type tag and
bytes); those too large for one request are uploaded first as parts,
named by their SHA-256, and a checkpoint or write that names them commits
only if every part is there, so no reader ever finds half of one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import islice

from cairn import jsontext
from cairn.addresses.ports import AddressStore
from cairn.checkpoints.models import (
    Blob,
    CheckpointPage,
    CheckpointRef,
    NewCheckpoint,
    Owner,
    Search,
    StoredCheckpoint,
    Write,
    WritePage,
    owner_of,
)
from cairn.checkpoints.ports import CheckpointStore
from cairn.clock import Clock
from cairn.errors import InvalidRequest, NotFound, PayloadTooLarge

# A checkpoint's value inline in its request and its item; larger ones are uploaded as parts.
MAX_INLINE_CHECKPOINT_BYTES = 262_144
# A write's value inline: a request carries up to MAX_WRITES of them within one transaction's 4 MB.
MAX_INLINE_WRITE_BYTES = 49_152
MAX_WRITES = 64
# One uploaded part (a request of its own) and the parts one value may have.
PART_BYTES = 2_097_152
MAX_PARTS = 32
MAX_METADATA_BYTES = 65_536
MAX_FILTER_KEYS = 32
# DynamoDB takes at most 100 actions in one transaction: a commit's own (the address's check, the
# update of its count of stored bytes, and what it writes), plus one check per part.
MAX_ACTIONS = 100
# What one answer carries as Lambda writes it (`jsontext.sent_size`), far below Lambda's 6 MB.
ANSWER_BUDGET = 4_000_000
_ENTRY_OVERHEAD = 512
# Runs or threads one prune or deletion names; a saver sends more in several requests.
MAX_RUN_IDS = 100
MAX_PRUNE_THREADS = 100
PRUNE_STRATEGIES = ("keep_latest", "delete")
_DIGEST = re.compile(r"[0-9a-f]{64}")


class Checkpoints:
    def __init__(self, addresses: AddressStore, store: CheckpointStore, clock: Clock) -> None:
        self._addresses = addresses
        self._store = store
        self._clock = clock

    def _owner(self, address_id: str, read_token: str | None) -> Owner:
        return owner_of(self._addresses, address_id, read_token, now=self._clock())

    # -- writes --------------------------------------------------------------

    def put(self, address_id: str, read_token: str | None, checkpoint: NewCheckpoint) -> None:
        """Store `checkpoint` as its thread's new head; `CheckpointStale` if another writer moved the head first."""
        _check_blob(checkpoint.checkpoint, MAX_INLINE_CHECKPOINT_BYTES, "checkpoint")
        if len(checkpoint.metadata_json.encode()) > MAX_METADATA_BYTES:
            raise PayloadTooLarge(f"Metadata takes at most {MAX_METADATA_BYTES} bytes as JSON.", field="metadata")
        if len(set(checkpoint.checkpoint.parts)) + 4 > MAX_ACTIONS:
            raise PayloadTooLarge("Too many parts for one checkpoint.", field="checkpoint.parts")
        owner = self._owner(address_id, read_token)
        self._store.put(owner, checkpoint, now=self._clock())

    def put_writes(
        self,
        address_id: str,
        read_token: str | None,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[Write],
    ) -> None:
        """Store a task's writes against a checkpoint; one already stored under its task and index stays."""
        if not writes or len(writes) > MAX_WRITES:
            raise InvalidRequest(f"Send 1 to {MAX_WRITES} writes at once.", field="writes")
        if len({(write.task_id, write.index) for write in writes}) < len(writes):
            raise InvalidRequest("Two writes have the same task and index.", field="writes")
        for write in writes:
            _check_blob(write.value, MAX_INLINE_WRITE_BYTES, "writes.value")
        parts = {part for write in writes for part in write.value.parts}
        if 2 + len(writes) + len(parts) > MAX_ACTIONS:
            raise PayloadTooLarge("Too many writes and parts for one request: send fewer at once.", field="writes")
        owner = self._owner(address_id, read_token)
        self._store.put_writes(owner, CheckpointRef(thread_id, checkpoint_ns, checkpoint_id), writes, now=self._clock())

    def put_part(self, address_id: str, read_token: str | None, *, thread_id: str, digest: str, data: bytes) -> None:
        """Keep one part of a large value for the thread; `digest` must be the SHA-256 of `data`."""
        if len(data) > PART_BYTES:
            raise PayloadTooLarge(f"A part holds at most {PART_BYTES} bytes.", max_bytes=PART_BYTES)
        if hashlib.sha256(data).hexdigest() != digest:
            raise InvalidRequest("The part's bytes do not have this SHA-256.", field="digest")
        owner = self._owner(address_id, read_token)
        self._store.put_part(owner, thread_id, digest, data, now=self._clock())

    def delete_thread(self, address_id: str, read_token: str | None, thread_id: str) -> None:
        """Remove the thread's checkpoints, writes and parts in every namespace; nothing to remove is no error."""
        self._owner(address_id, read_token)
        self._store.delete_thread(address_id, thread_id)

    def copy_thread(self, address_id: str, read_token: str | None, *, source: str, target: str) -> int:
        """Copy a thread (every namespace, checkpoint, write and part) to a thread that has none yet."""
        if source == target:
            raise InvalidRequest("A thread cannot be copied onto itself.", field="target_thread_id")
        owner = self._owner(address_id, read_token)
        return self._store.copy_thread(owner, source, target, now=self._clock())

    def prune(self, address_id: str, read_token: str | None, *, thread_ids: Sequence[str], strategy: str) -> int:
        """`keep_latest`: each namespace keeps its newest checkpoint (and what a `DeltaChannel` replays); `delete`:
        the threads go, as `delete_thread`."""
        if strategy not in PRUNE_STRATEGIES:
            raise InvalidRequest(f"The strategy is one of {', '.join(PRUNE_STRATEGIES)}.", field="strategy")
        if not thread_ids or len(thread_ids) > MAX_PRUNE_THREADS:
            raise InvalidRequest(f"Name 1 to {MAX_PRUNE_THREADS} threads at once.", field="thread_ids")
        self._owner(address_id, read_token)
        removed = 0
        for thread_id in dict.fromkeys(thread_ids):
            if strategy == "delete":
                self._store.delete_thread(address_id, thread_id)
            else:
                removed += self._store.prune(address_id, thread_id, now=self._clock())
        return removed

    def delete_for_runs(self, address_id: str, read_token: str | None, run_ids: Sequence[str]) -> int:
        """Remove the checkpoints of these runs (metadata `run_id`) in every thread of the address."""
        if not run_ids or len(run_ids) > MAX_RUN_IDS:
            raise InvalidRequest(f"Name 1 to {MAX_RUN_IDS} runs at once.", field="run_ids")
        self._owner(address_id, read_token)
        return self._store.delete_for_runs(address_id, frozenset(run_ids), now=self._clock())

    # -- reads ---------------------------------------------------------------

    def read_part(self, address_id: str, read_token: str | None, *, thread_id: str, digest: str) -> bytes:
        self._owner(address_id, read_token)
        data = self._store.read_part(address_id, thread_id, digest) if _DIGEST.fullmatch(digest) else None
        if data is None:
            raise NotFound("No such part in this thread.", digest=digest)
        return data

    def search(self, address_id: str, read_token: str | None, search: Search) -> CheckpointPage:
        """The checkpoints the search names, newest first, as many as fit one answer; `next` resumes."""
        if len(search.metadata) > MAX_FILTER_KEYS:
            raise InvalidRequest(f"Filter on at most {MAX_FILTER_KEYS} metadata keys.", field="filter")
        if (search.checkpoint_ns is not None or search.checkpoint_id is not None) and search.thread_id is None:
            raise InvalidRequest("A namespace or checkpoint id needs its thread_id.", field="thread_id")
        if search.checkpoint_id is not None and search.checkpoint_ns is None:
            raise InvalidRequest("A checkpoint id needs its checkpoint_ns.", field="checkpoint_ns")
        self._owner(address_id, read_token)
        found: Iterator[StoredCheckpoint] = (
            checkpoint
            for checkpoint in self._store.checkpoints(address_id, search)
            if all(checkpoint.metadata.get(name) == value for name, value in search.metadata.items())
        )
        if search.limit is not None:
            found = islice(found, search.limit)
        return _page(found)

    def writes(
        self,
        address_id: str,
        read_token: str | None,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        after: str,
    ) -> WritePage:
        """The rest of a checkpoint's writes, after the `more_writes` position of an answer that had no room."""
        self._owner(address_id, read_token)
        writes = self._store.writes_after(address_id, CheckpointRef(thread_id, checkpoint_ns, checkpoint_id), after)
        taken: list[Write] = []
        budget = ANSWER_BUDGET
        for write in writes:
            cost = _write_cost(write)
            if taken and cost > budget:
                return WritePage(taken, taken[-1].position)
            taken.append(write)
            budget -= cost
        return WritePage(taken, None)


def _check_blob(blob: Blob, max_inline: int, field: str) -> None:
    if blob.data is not None:
        if len(blob.data) > max_inline:
            raise PayloadTooLarge(
                f"Inline values hold at most {max_inline} bytes; upload larger ones as parts.",
                field=field,
                max_bytes=max_inline,
            )
        return
    if not blob.parts or len(blob.parts) > MAX_PARTS:
        raise InvalidRequest(f"A value has its bytes inline or in 1 to {MAX_PARTS} parts.", field=field)
    if not 0 < blob.size <= len(blob.parts) * PART_BYTES:
        raise InvalidRequest("The size does not fit the parts named.", field=f"{field}.size")


def _checkpoint_cost(checkpoint: StoredCheckpoint) -> int:
    """What a checkpoint takes in an answer, its writes aside: every text escaped as Lambda carries it."""
    names = [checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id, checkpoint.parent_id]
    metadata = jsontext.value_sent_size(checkpoint.metadata)
    return _blob_cost(checkpoint.checkpoint) + jsontext.value_sent_size(names) + metadata


def _write_cost(write: Write) -> int:
    names = [write.task_id, write.task_path, write.channel]
    return _blob_cost(write.value) + jsontext.value_sent_size(names)


def _blob_cost(blob: Blob) -> int:
    """What a value takes in an answer: base64 inline, or its parts' names."""
    type_tag = jsontext.value_sent_size(blob.type)
    return blob.inline_size * 4 // 3 + type_tag + 70 * len(blob.parts) + _ENTRY_OVERHEAD


def _page(found: Iterator[StoredCheckpoint]) -> CheckpointPage:
    """As many checkpoints as fit one answer (at least one); writes beyond the room left are read after."""
    budget = ANSWER_BUDGET
    taken: list[StoredCheckpoint] = []
    for checkpoint in found:
        cost = _checkpoint_cost(checkpoint)
        if taken and cost > budget:
            return CheckpointPage(taken, taken[-1].position)
        budget -= cost
        kept = 0
        for write in checkpoint.writes:
            if _write_cost(write) > budget:
                break
            budget -= _write_cost(write)
            kept += 1
        if kept < len(checkpoint.writes):
            more = checkpoint.writes[kept - 1].position if kept else checkpoint.position
            checkpoint = replace(checkpoint, writes=checkpoint.writes[:kept], more_writes=more)
            taken.append(checkpoint)
            return CheckpointPage(taken, checkpoint.position)
        taken.append(checkpoint)
    return CheckpointPage(taken, None)
