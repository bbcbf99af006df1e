"""`CairnSaver`: LangGraph's `BaseCheckpointSaver` on an address's checkpoint routes.

Every value goes through the saver's serializer (`dumps_typed`, LangGraph's
`JsonPlusSerializer` unless another is given) and travels as its type and
its bytes, so whatever LangGraph stores comes back as it was. A value too
large to travel inline is uploaded first as parts (each named by its
SHA-256, checked again when read), which the checkpoint then names.

A task's writes land whole: LangGraph takes a task with any writes stored
for finished and resumes from them, so writes stored in part (a map step's
`Send`s, by the hundred) would go on without the rest. Those that one commit
cannot hold travel as one write holding them all (`BUNDLED_WRITES`), which
reads give back as the writes they hold.

Write ownership: a put sends the checkpoint it continues, and the server
commits it only while that is still the thread's head; a writer another
overtook gets `CheckpointStale`. The first put of a thread continues no
checkpoint: when this saver has just found the thread empty (LangGraph reads
the thread before it writes), the put asks for a thread that is still
empty, so of two runs that start one thread at once, one is refused too.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from cairn.client.address import Address
from cairn.client.http import HttpClient, json_body
from cairn.client.paths import segment
from cairn.errors import CheckpointPartMissing
from cairn.integrations.langgraph import delta
from cairn.integrations.settled import settled

# The server's limits (`cairn.checkpoints.threads`): values above the inline ones travel as parts.
MAX_INLINE_CHECKPOINT_BYTES = 262_144
MAX_INLINE_WRITE_BYTES = 49_152
PART_BYTES = 2_097_152
MAX_PARTS = 32
MAX_WRITES = 64
MAX_ACTIONS = 100
# The actions of a commit of writes besides the writes and their parts' checks: the address's check and its count.
_COMMIT_ACTIONS = 2
# The channel of a write holding a task's writes that one commit cannot hold (reserved: never a graph's own).
BUNDLED_WRITES = "__cairn_bundled_writes__"
# Runs or threads one prune or deletion request names (`MAX_RUN_IDS`, `MAX_PRUNE_THREADS`).
MAX_NAMED = 100
# Threads this saver found empty and has not written since (a bound on what it remembers).
_EMPTY_REMEMBERED = 4096


class CairnSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose threads live in one Cairn address.

    The address's read token owns them: one job needs one token, and its
    threads go when the address is deleted or expires. Sync and async
    methods alike talk HTTP through the address's client (timeouts, retries
    on 429 and 5xx); the async ones run it on a worker thread.
    """

    def __init__(self, address: Address, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.address = address
        self._http: HttpClient = address.http
        self._url = f"{address.address_url}/checkpoints"
        self._token = address.read_token
        self._found_empty: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str, **kwargs: Any) -> CairnSaver:
        """A saver for an address known by id and read token."""
        return cls(Address.connect(base_url, address_id, read_token), **kwargs)

    # -- reads ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, checkpoint_ns = _thread(config)
        checkpoint_id = get_checkpoint_id(config)
        query: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        query.update({"checkpoint_id": checkpoint_id} if checkpoint_id else {"limit": 1})
        found = next(self._search(query), None)
        if checkpoint_id is None:
            self._note_empty((thread_id, checkpoint_ns), found is None)
        return found

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        query: dict[str, Any] = {"filter": filter or {}}
        if config is not None:
            configurable = config["configurable"]
            query["thread_id"] = str(configurable["thread_id"])
            if configurable.get("checkpoint_ns") is not None:
                query["checkpoint_ns"] = configurable["checkpoint_ns"]
            if get_checkpoint_id(config):
                query["checkpoint_id"] = get_checkpoint_id(config)
                query.setdefault("checkpoint_ns", "")
        if before is not None and get_checkpoint_id(before):
            query["before"] = get_checkpoint_id(before)
        if limit is not None:
            query["limit"] = limit
        return self._search(query)

    def _search(self, query: dict[str, Any]) -> Iterator[CheckpointTuple]:
        """Page after page of the search's answer, as tuples; a limit counts across pages."""
        remaining = query.get("limit")
        while True:
            page = self._post("/search", query)
            for found in page["checkpoints"]:
                yield self._tuple(found)
            if remaining is not None:
                remaining -= len(page["checkpoints"])
                if remaining <= 0:
                    return
                query = {**query, "limit": remaining}
            if not page["next"]:
                return
            query = {**query, "after": page["next"]}

    def _tuple(self, found: dict[str, Any]) -> CheckpointTuple:
        thread_id, checkpoint_ns = found["thread_id"], found["checkpoint_ns"]
        writes = list(found["writes"])
        after = found["more_writes"]
        while after:
            page = self._post(
                "/writes/search",
                {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": found["checkpoint_id"],
                    "after": after,
                },
            )
            writes.extend(page["writes"])
            after = page["next"]
        writes.sort(key=lambda write: writes_sort_key(write["task_path"], write["task_id"], write["idx"]))
        pending = [each for write in writes for each in self._pending(thread_id, write)]
        parent = found["parent_id"]
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, found["checkpoint_id"]),
            checkpoint=self._load(thread_id, found["checkpoint"]),
            metadata=found["metadata"],
            parent_config=_config(thread_id, checkpoint_ns, parent) if parent else None,
            pending_writes=pending,
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The writes a `DeltaChannel` is rebuilt from, its ancestors listed a page at a time (`delta`)."""
        if not channels:
            return {}
        target = self.get_tuple(config)
        if target is None:
            return delta.histories(channels, iter(()))
        thread_id, checkpoint_ns = _thread(target.config)

        def listing(before: str | None, limit: int) -> Iterator[CheckpointTuple]:
            query = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "before": before, "limit": limit}
            return self._search(query)

        return delta.histories(channels, delta.parent_chain(target, listing))

    # -- writes --------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint as its thread's head; `CheckpointStale` when another writer moved the thread on."""
        thread_id, checkpoint_ns = _thread(config)
        parent_id = get_checkpoint_id(config)
        with self._lock:
            found_empty = (thread_id, checkpoint_ns) in self._found_empty
        request = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
            "parent_id": parent_id,
            "if_new_thread": parent_id is None and found_empty,
            "checkpoint": self._dump(thread_id, checkpoint, MAX_INLINE_CHECKPOINT_BYTES),
            "metadata": get_serializable_checkpoint_metadata(config, metadata),
        }
        try:
            self._post("", request)
        except CheckpointPartMissing:
            # A prune found a part unnamed between its upload and this put: uploaded again, it may be named.
            request["checkpoint"] = self._dump(thread_id, checkpoint, MAX_INLINE_CHECKPOINT_BYTES)
            self._post("", request)
        self._note_empty((thread_id, checkpoint_ns), False)
        return _config(thread_id, checkpoint_ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes; each (task, index) is stored once, so a repeated call stores nothing twice."""
        thread_id, checkpoint_ns = _thread(config)
        checkpoint_id = get_checkpoint_id(config)
        # LangGraph's special writes have fixed indexes: of two to one channel, the later is the one kept.
        indexed = {
            WRITES_IDX_MAP.get(channel, index): (channel, value) for index, (channel, value) in enumerate(writes)
        }
        encoded = {index: (channel, *self.serde.dumps_typed(value)) for index, (channel, value) in indexed.items()}
        if len(list(_batches(encoded))) > 1:
            encoded = self._bundled(encoded)
        # One request but for special writes too large to share a commit with the others.
        for batch in _batches(encoded):
            request = {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "writes": [self._write_entry(thread_id, index, encoded[index]) for index in batch],
            }
            try:
                self._post("/writes", request)
            except CheckpointPartMissing:
                # As in `put`: the batch's parts uploaded again, it may name them.
                request["writes"] = [self._write_entry(thread_id, index, encoded[index]) for index in batch]
                self._post("/writes", request)

    def _write_entry(self, thread_id: str, index: int, write: tuple[str, str, bytes]) -> dict[str, Any]:
        channel, kind, data = write
        return {"idx": index, "channel": channel, "value": self._stored(thread_id, kind, data, MAX_INLINE_WRITE_BYTES)}

    def _bundled(self, encoded: dict[int, tuple[str, str, bytes]]) -> dict[int, tuple[str, str, bytes]]:
        """The special writes as they are and every other one in one write (`BUNDLED_WRITES`, under the first
        one's index: never a special write's, which a later one replaces). Writes larger in all than one value
        holds (`MAX_PARTS` parts, 64 MiB) stay as they are, to go in several commits rather than be refused."""
        ordinary = sorted((index, write) for index, write in encoded.items() if index >= 0)
        if not ordinary:
            return encoded
        kind, data = self.serde.dumps_typed([[index, *write] for index, write in ordinary])
        if _write_actions(len(data)) - 1 > MAX_PARTS:
            return encoded
        special = {index: write for index, write in encoded.items() if index < 0}
        return {**special, ordinary[0][0]: (BUNDLED_WRITES, kind, data)}

    def delete_thread(self, thread_id: str) -> None:
        """Remove the thread's checkpoints and writes in every namespace."""
        self._http.request("DELETE", self._url, token=self._token, params={"thread_id": str(thread_id)})
        self._forget(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints (and their writes) whose metadata's `run_id` is one of these, in every thread.

        A thread whose head goes has it moved to the newest checkpoint it keeps.
        """
        unique = list(dict.fromkeys(str(run_id) for run_id in run_ids))
        for start in range(0, len(unique), MAX_NAMED):
            self._post("/runs/delete", {"run_ids": unique[start : start + MAX_NAMED]})

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and part of a thread to a thread that has none yet.

        `CheckpointThreadExists` when the target has checkpoints already.
        """
        self._post("/copy", {"source_thread_id": str(source_thread_id), "target_thread_id": str(target_thread_id)})
        self._forget(str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: each namespace of each thread keeps its newest checkpoint; `delete`: the threads go.

        `keep_latest` also keeps the ancestors a `DeltaChannel` rebuilds its
        value from, back to where each was last stored whole. Uploaded parts
        that nothing names any more go, with their room, at a prune five
        minutes or more after one found them unnamed.
        """
        unique = list(dict.fromkeys(str(thread_id) for thread_id in thread_ids))
        for start in range(0, len(unique), MAX_NAMED):
            self._post("/prune", {"thread_ids": unique[start : start + MAX_NAMED], "strategy": strategy})
        for thread_id in unique:
            self._forget(thread_id)

    def _forget(self, thread_id: str) -> None:
        """What this saver remembers of a thread it has just changed as a whole: nothing holds any more."""
        with self._lock:
            for remembered in [key for key in self._found_empty if key[0] == thread_id]:
                del self._found_empty[remembered]

    # -- async twins: the same calls, on a worker thread; a write's cancelled caller hears of it once it has
    # settled (`cairn.integrations.settled`) ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self.list(config, filter=filter, before=before, limit=limit)
        while (found := await asyncio.to_thread(next, pages, None)) is not None:
            yield found

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(self.get_delta_channel_history, config=config, channels=channels)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await settled(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await settled(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await settled(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await settled(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await settled(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await settled(self.prune, thread_ids, strategy=strategy)

    # -- values on the wire --------------------------------------------------

    def _dump(self, thread_id: str, value: Any, max_inline: int) -> dict[str, Any]:
        """The value as the serializer makes it: inline, or uploaded as parts first."""
        return self._stored(thread_id, *self.serde.dumps_typed(value), max_inline)

    def _stored(self, thread_id: str, kind: str, data: bytes, max_inline: int) -> dict[str, Any]:
        """A serialized value as it travels: inline, or uploaded as parts first."""
        if len(data) <= max_inline:
            return {"type": kind, "data": base64.b64encode(data).decode("ascii")}
        parts = []
        for start in range(0, len(data), PART_BYTES):
            part = data[start : start + PART_BYTES]
            digest = hashlib.sha256(part).hexdigest()
            body = json_body({"thread_id": thread_id, "data": base64.b64encode(part).decode("ascii")})
            self._http.request("PUT", f"{self._url}/parts/{digest}", token=self._token, body=body)
            parts.append(digest)
        return {"type": kind, "parts": parts, "size": len(data)}

    def _load(self, thread_id: str, value: dict[str, Any]) -> Any:
        if value.get("data") is not None:
            return self.serde.loads_typed((value["type"], base64.b64decode(value["data"])))
        pieces = []
        for digest in value["parts"]:
            url = f"{self._url}/parts/{segment(digest, 'part digest')}"
            answer = self._http.request("GET", url, token=self._token, params={"thread_id": thread_id}).json()
            piece = base64.b64decode(answer["data"])
            if hashlib.sha256(piece).hexdigest() != digest:
                raise CheckpointPartMissing("A part read back does not have its SHA-256.", parts=[digest])
            pieces.append(piece)
        data = b"".join(pieces)
        if len(data) != value["size"]:
            raise CheckpointPartMissing("The parts read back do not make the stored size.", parts=value["parts"])
        return self.serde.loads_typed((value["type"], data))

    def _pending(self, thread_id: str, write: dict[str, Any]) -> Iterator[PendingWrite]:
        """The write as LangGraph reads it; a bundle (`BUNDLED_WRITES`) as the writes it holds, in order."""
        value = self._load(thread_id, write["value"])
        if write["channel"] != BUNDLED_WRITES:
            yield write["task_id"], write["channel"], value
            return
        for _, channel, kind, data in value:
            yield write["task_id"], channel, self.serde.loads_typed((kind, data))

    def _post(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self._http.request(
            "POST", self._url + path, token=self._token, body=json_body(request)
        ).json()
        return answer

    def _note_empty(self, thread: tuple[str, str], empty: bool) -> None:
        with self._lock:
            self._found_empty.pop(thread, None)
            if empty:
                self._found_empty[thread] = None
                while len(self._found_empty) > _EMPTY_REMEMBERED:
                    self._found_empty.popitem(last=False)


def _thread(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns") or ""


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}}


def _write_actions(size: int) -> int:
    """The actions a write of a serialized value of `size` bytes takes in its commit: its item, and a check of
    each part it is uploaded as when it does not travel inline."""
    return 1 + (0 if size <= MAX_INLINE_WRITE_BYTES else -(-size // PART_BYTES))


def _batches(encoded: Mapping[int, tuple[str, str, bytes]]) -> Iterator[list[int]]:
    """The writes' indexes in requests the server takes: at most MAX_WRITES, within one transaction's actions."""
    batch: list[int] = []
    actions = _COMMIT_ACTIONS
    for index, (_, _, data) in encoded.items():
        cost = _write_actions(len(data))
        if batch and (len(batch) == MAX_WRITES or actions + cost > MAX_ACTIONS):
            yield batch
            batch, actions = [], _COMMIT_ACTIONS
        batch.append(index)
        actions += cost
    if batch:
        yield batch
