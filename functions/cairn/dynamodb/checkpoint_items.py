"""Items of LangGraph checkpoints: heads, checkpoints, writes and uploaded parts (attribute names live here)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cairn import jsontext
from cairn.checkpoints.models import Blob, CheckpointRef, NewCheckpoint, Owner, StoredCheckpoint, Write
from cairn.dynamodb import blobs, keys, storage_usage
from cairn.dynamodb.address_items import DELETED, READ_TOKEN
from cairn.dynamodb.items import b, get_int, get_s, key, n, s

Item = dict[str, Any]

HEAD_ID = "checkpoint_id"
# On a part no checkpoint or write named when its thread was last pruned: since when (`CheckpointTable`).
ORPHANED_AT = "orphaned_at"
_TYPE = "type"
PARTS = "parts"
_SIZE = "size"
_TASK_ID = "task_id"


def expiry(owner: Owner) -> Item:
    """Every item of a thread goes when its address expires."""
    return {} if owner.expires_at is None else {"expires_at": n(int(owner.expires_at))}


def address_check(table: str, owner: Owner, *, now: float) -> Item:
    """The owner's address is live and the token its own: the first condition of every commit."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key(keys.address_pk(owner.address_id), keys.META),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#deleted) AND #token = :digest"
            " AND (attribute_not_exists(expires_at) OR expires_at > :now)",
            "ExpressionAttributeNames": {"#deleted": DELETED, "#token": READ_TOKEN},
            "ExpressionAttributeValues": {":digest": s(owner.read_token_digest), ":now": n(int(now))},
        }
    }


def part_check(table: str, owner: Owner, thread_id: str, digest: str) -> Item:
    """The part is there, and not on its way out: one found unnamed is named again only once uploaded again."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key(keys.address_pk(owner.address_id), keys.thread_part_sk(thread_id, digest)),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#orphaned)",
            "ExpressionAttributeNames": {"#orphaned": ORPHANED_AT},
        }
    }


def head_put(table: str, owner: Owner, checkpoint: NewCheckpoint) -> Item:
    """The thread's head moved to the checkpoint, under the condition its put claims."""
    put: Item = {
        "TableName": table,
        "Item": {
            **thread_head_key(owner.address_id, checkpoint.thread_id, checkpoint.checkpoint_ns),
            HEAD_ID: s(checkpoint.checkpoint_id),
            **expiry(owner),
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if checkpoint.parent_id is not None:
        put["ConditionExpression"] = "#head = :parent"
        put["ExpressionAttributeNames"] = {"#head": HEAD_ID}
        put["ExpressionAttributeValues"] = {":parent": s(checkpoint.parent_id)}
    elif checkpoint.if_new_thread:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": put}


def checkpoint_put(table: str, owner: Owner, checkpoint: NewCheckpoint, *, now: float) -> Item:
    """The checkpoint's item; a checkpoint id is stored once."""
    sk = keys.checkpoint_sk(checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id)
    item = {
        **key(keys.address_pk(owner.address_id), sk),
        "thread_id": s(checkpoint.thread_id),
        "checkpoint_ns": s(checkpoint.checkpoint_ns),
        "checkpoint_id": s(checkpoint.checkpoint_id),
        "metadata": s(checkpoint.metadata_json),
        "created_at": n(round(now, 3)),
        **blob_attributes(checkpoint.checkpoint),
        **expiry(owner),
    }
    if checkpoint.parent_id is not None:
        item["parent_id"] = s(checkpoint.parent_id)
    return {
        "Put": {
            "TableName": table,
            "Item": storage_usage.with_count(item),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def write_put(table: str, owner: Owner, checkpoint: CheckpointRef, write: Write, *, replaced: Item | None) -> Item:
    """A write's item; a regular write (index 0 or more) is stored once, a special one replaced.

    `replaced`: what a special write's key held when read (its count), which the replacement
    requires it still to hold, so that the count moves by exactly what the replacement changes.
    """
    sk = keys.checkpoint_write_sk(
        checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id, write.task_id, write.index
    )
    item = {
        **key(keys.address_pk(owner.address_id), sk),
        "checkpoint_id": s(checkpoint.checkpoint_id),
        _TASK_ID: s(write.task_id),
        "task_path": s(write.task_path),
        "idx": n(write.index),
        "channel": s(write.channel),
        **blob_attributes(write.value),
        **expiry(owner),
    }
    put: Item = {
        "TableName": table,
        "Item": storage_usage.with_count(item),
        **_unchanged(replaced if write.index < 0 else None),
    }
    return {"Put": put}


def _unchanged(replaced: Item | None) -> Item:
    """The condition that an item's key holds what was read: nothing, or an item that counted as much."""
    if replaced is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    if storage_usage.COUNTED not in replaced:
        # Stored before items were counted: it counts nothing, and the replacement counts from nothing.
        return {
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#counted)",
            "ExpressionAttributeNames": {"#counted": storage_usage.COUNTED},
        }
    return storage_usage.still_counting(replaced)


def part_items(owner: Owner, thread_id: str, digest: str, data: bytes) -> list[Item]:
    """The part's item, then its pieces when it is larger than one item holds."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.thread_part_sk(thread_id, digest)
    payload, pieces = blobs.split(pk, sk, data, **expiry(owner))
    return [storage_usage.with_count({**key(pk, sk), _SIZE: n(len(data)), **payload, **expiry(owner)}, pieces), *pieces]


def blob_attributes(blob: Blob) -> Item:
    if blob.data is not None:
        return {_TYPE: s(blob.type), "data": b(blob.data), _SIZE: n(len(blob.data))}
    return {_TYPE: s(blob.type), PARTS: {"L": [s(part) for part in blob.parts]}, _SIZE: n(blob.size)}


def blob_from(item: Item) -> Blob:
    if "data" in item:
        return Blob(type=get_s(item, _TYPE) or "", data=bytes(item["data"]["B"]), size=get_int(item, _SIZE))
    parts = tuple(part["S"] for part in item.get(PARTS, {"L": []})["L"])
    return Blob(type=get_s(item, _TYPE) or "", parts=parts, size=get_int(item, _SIZE))


def is_write(item: Item) -> bool:
    return _TASK_ID in item


def write_from(item: Item) -> Write:
    return Write(
        task_id=get_s(item, _TASK_ID) or "",
        index=get_int(item, "idx"),
        channel=get_s(item, "channel") or "",
        value=blob_from(item),
        task_path=get_s(item, "task_path") or "",
        position=item["sk"]["S"],
    )


def checkpoint_from(item: Item, writes: list[Write]) -> StoredCheckpoint:
    return StoredCheckpoint(
        thread_id=get_s(item, "thread_id") or "",
        checkpoint_ns=get_s(item, "checkpoint_ns") or "",
        checkpoint_id=get_s(item, "checkpoint_id") or "",
        parent_id=get_s(item, "parent_id"),
        checkpoint=blob_from(item),
        metadata=jsontext.parse(get_s(item, "metadata") or "{}"),
        writes=tuple(writes),
        position=item["sk"]["S"],
    )


def write_sk_of(item: Item, checkpoint_sk: str) -> bool:
    """Whether `item` is a write of the checkpoint at `checkpoint_sk` (its writes sort right after it)."""
    return is_write(item) and str(item["sk"]["S"]).startswith(checkpoint_sk + "#")


def grouped(items: Iterable[Item]) -> Iterator[tuple[Item, list[Item]]]:
    """Checkpoints with their writes, lazily, from an ascending range of one thread or address.

    Writes whose checkpoint is not there (a put not yet committed, or
    refused) belong to none and are left out: a put may still name them.
    """
    current: tuple[Item, list[Item]] | None = None
    for item in items:
        if not is_write(item):
            if current is not None:
                yield current
            current = (item, [])
        elif current is not None and write_sk_of(item, current[0]["sk"]["S"]):
            current[1].append(item)
    if current is not None:
        yield current


def head_key(address_id: str, item: Item) -> Item:
    """The key of the head of the checkpoint item's thread and namespace."""
    return thread_head_key(address_id, get_s(item, "thread_id") or "", get_s(item, "checkpoint_ns") or "")


def thread_head_key(address_id: str, thread_id: str, checkpoint_ns: str) -> Item:
    return key(keys.address_pk(address_id), keys.thread_head_sk(thread_id, checkpoint_ns))


def parts_of(item: Item) -> list[str]:
    return [part["S"] for part in item.get(PARTS, {"L": []})["L"]]


def item_bytes(item: Item) -> int:
    """What an item weighs in a transaction's 4 MB: every attribute's name and value, text as UTF-8 (a
    character of metadata or of an id can be four bytes there)."""
    return sum(len(name.encode()) + storage_usage.value_bytes(value) for name, value in item.items())


def copied(item: Item, owner: Owner, source_prefix: str, target_prefix: str, target_thread_id: str) -> Item:
    """A checkpoint or write item of the source thread as the target thread's: its key, thread id and expiry."""
    sk = target_prefix + item["sk"]["S"][len(source_prefix) :]
    result = {**item, "sk": s(sk), **expiry(owner)}
    if not is_write(item):
        result["thread_id"] = s(target_thread_id)
    return storage_usage.with_count(result)


def namespace_of(item: Item) -> str:
    return get_s(item, "checkpoint_ns") or ""


def run_of(item: Item) -> str | None:
    """The `run_id` in a checkpoint's metadata (None: it has none, or one that is not text)."""
    metadata = jsontext.parse(get_s(item, "metadata") or "{}")
    run_id = metadata.get("run_id") if isinstance(metadata, dict) else None
    return run_id if isinstance(run_id, str) else None


def delta_ancestors(kept: Item, checkpoints: Iterable[Item]) -> list[Item]:
    """The ancestors a LangGraph `DeltaChannel` of the kept checkpoint rebuilds its value from, newest first.

    Between full values a `DeltaChannel` stores none: LangGraph walks the
    parent chain, gathering each ancestor's writes, back to the nearest
    checkpoint that stored the value whole. The checkpoint's metadata names
    the channels still waiting for one (`counters_since_delta_snapshot`;
    a channel stored whole there is left out), so the walk ends at the
    checkpoint where none is waiting, or at the chain's first.
    """
    by_id = {get_s(item, "checkpoint_id"): item for item in checkpoints if namespace_of(item) == namespace_of(kept)}
    waiting = _delta_channels_waiting(kept)
    chain: list[Item] = []
    seen = {get_s(kept, "checkpoint_id")}
    parent_id = get_s(kept, "parent_id")
    # A parent already gone (pruned or deleted by run) ends the walk, as it ends LangGraph's.
    while waiting and parent_id not in seen and (parent := by_id.get(parent_id)) is not None:
        chain.append(parent)
        seen.add(parent_id)
        waiting &= _delta_channels_waiting(parent)
        parent_id = get_s(parent, "parent_id")
    return chain


def _delta_channels_waiting(item: Item) -> set[str]:
    metadata = jsontext.parse(get_s(item, "metadata") or "{}")
    counters = metadata.get("counters_since_delta_snapshot") if isinstance(metadata, dict) else None
    return set(counters) if isinstance(counters, dict) else set()


def exists_check(table: str, item: Item) -> Item:
    """The checkpoint is still there: a head moved to it points at something."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"pk": item["pk"], "sk": item["sk"]},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }


def head_after_drop(table: str, address_id: str, found: Item, head: str | None, replacement: Item | None) -> Item:
    """What a checkpoint's deletion does to its thread's head, under the head as it was read.

    Not the head: the head is checked to be still another checkpoint. The
    head: it moves to `replacement`, or goes when there is none, only while
    it is still this checkpoint, so a writer that continued it meanwhile is
    never undone.
    """
    item_key = head_key(address_id, found)
    names = {"#head": HEAD_ID}
    values = {":id": s(get_s(found, HEAD_ID) or "")}
    if head != get_s(found, HEAD_ID):
        condition = "attribute_not_exists(#head) OR #head <> :id"
        return {
            "ConditionCheck": {
                "TableName": table,
                "Key": item_key,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
    guarded = {
        "ConditionExpression": "#head = :id",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if replacement is None:
        return {"Delete": {"TableName": table, "Key": item_key, **guarded}}
    moved = {**item_key, HEAD_ID: s(get_s(replacement, HEAD_ID) or "")}
    if "expires_at" in found:
        moved["expires_at"] = found["expires_at"]
    return {"Put": {"TableName": table, "Item": moved, **guarded}}


def copied_head(table: str, owner: Owner, head_sk: str, checkpoint_id: str | None) -> Item:
    """A copy's head: put only where the target has none, or has this one (a copy sent again)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **key(keys.address_pk(owner.address_id), head_sk),
                HEAD_ID: s(checkpoint_id or ""),
                **expiry(owner),
            },
            "ConditionExpression": "attribute_not_exists(pk) OR #head = :id",
            "ExpressionAttributeNames": {"#head": HEAD_ID},
            "ExpressionAttributeValues": {":id": s(checkpoint_id or "")},
        }
    }
