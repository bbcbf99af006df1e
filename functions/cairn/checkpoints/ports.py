"""What the checkpoint use case needs from storage; `cairn.dynamodb.checkpoint_table` implements it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from cairn.checkpoints.models import CheckpointRef, NewCheckpoint, Owner, Search, StoredCheckpoint, Write


class CheckpointStore(Protocol):
    def put(self, owner: Owner, checkpoint: NewCheckpoint, *, now: float) -> None:
        """Store the checkpoint and move its thread's head to it, in one commit.

        The commit's conditions: the owner's address is live and the token
        its own (`Unauthorized`), the head is still the checkpoint's parent
        (`CheckpointStale`, unless the head is this very checkpoint: an exact
        retry, which changes nothing), every part it names is there
        (`CheckpointPartMissing`).
        """
        ...

    def put_writes(self, owner: Owner, checkpoint: CheckpointRef, writes: Sequence[Write], *, now: float) -> None:
        """Store the writes in one commit; a regular write already stored under its task and index stays as it is."""
        ...

    def put_part(self, owner: Owner, thread_id: str, digest: str, data: bytes, *, now: float) -> None:
        """Keep `data`, whose SHA-256 is `digest`, for the thread's checkpoints and writes to name."""
        ...

    def read_part(self, address_id: str, thread_id: str, digest: str) -> bytes | None: ...

    def checkpoints(self, address_id: str, search: Search) -> Iterator[StoredCheckpoint]:
        """The checkpoints the search names (all their writes), newest first within each namespace.

        Read lazily, page by page; `metadata` and `limit` are the caller's to apply.
        """
        ...

    def writes_after(self, address_id: str, checkpoint: CheckpointRef, after: str) -> Iterator[Write]:
        """The writes of a checkpoint after `after` (a write's `position`), read lazily."""
        ...

    def delete_thread(self, address_id: str, thread_id: str) -> None:
        """Remove every checkpoint, write, head and part of the thread, in every namespace."""
        ...

    def copy_thread(self, owner: Owner, source_thread_id: str, target_thread_id: str, *, now: float) -> int:
        """Copy every checkpoint, write and part of the source thread to the target, heads last; the count copied.

        `CheckpointThreadExists` when the target has a head the copy would
        not give it. Sending a copy again after it failed midway finishes it.
        """
        ...

    def prune(self, address_id: str, thread_id: str, *, now: float) -> int:
        """Keep the newest checkpoint of each namespace of the thread, with its writes; the count removed.

        A namespace also keeps the ancestors of its newest checkpoint that a
        LangGraph `DeltaChannel` rebuilds its value from.
        """
        ...

    def delete_for_runs(self, address_id: str, run_ids: frozenset[str], *, now: float) -> int:
        """Remove every checkpoint whose metadata's `run_id` is one of `run_ids`, with its writes; the count removed.

        A head on a removed checkpoint moves to the newest one its namespace
        keeps (or goes), in the same commit.
        """
        ...
