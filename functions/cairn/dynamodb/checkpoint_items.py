"""Items of LangGraph checkpoints: heads, checkpoints, writes and uploaded parts (attribute names live here)."""

from __future__ import annotations

from typing import Any

from cairn import jsontext
from cairn.checkpoints.models import Blob, NewCheckpoint, Owner, StoredCheckpoint, Write
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.address_items import DELETED, READ_TOKEN
from cairn.dynamodb.items import b, get_int, get_s, key, n, s

Item = dict[str, Any]

HEAD_ID = "checkpoint_id"
_TYPE = "type"
_PARTS = "parts"
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
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key(keys.address_pk(owner.address_id), keys.thread_part_sk(thread_id, digest)),
            "ConditionExpression": "attribute_exists(pk)",
        }
    }


def head_put(table: str, owner: Owner, checkpoint: NewCheckpoint) -> Item:
    """The thread's head moved to the checkpoint, under the condition its put claims."""
    put: Item = {
        "TableName": table,
        "Item": {
            **key(
                keys.address_pk(owner.address_id), keys.thread_head_sk(checkpoint.thread_id, checkpoint.checkpoint_ns)
            ),
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
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def write_put(table: str, owner: Owner, thread_id: str, checkpoint_ns: str, checkpoint_id: str, write: Write) -> Item:
    """A write's item; a regular write (index 0 or more) is stored once, a special one replaced."""
    sk = keys.checkpoint_write_sk(thread_id, checkpoint_ns, checkpoint_id, write.task_id, write.index)
    put: Item = {
        "TableName": table,
        "Item": {
            **key(keys.address_pk(owner.address_id), sk),
            "checkpoint_id": s(checkpoint_id),
            _TASK_ID: s(write.task_id),
            "task_path": s(write.task_path),
            "idx": n(write.index),
            "channel": s(write.channel),
            **blob_attributes(write.value),
            **expiry(owner),
        },
    }
    if write.index >= 0:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": put}


def part_items(owner: Owner, thread_id: str, digest: str, data: bytes) -> list[Item]:
    """The part's item, then its pieces when it is larger than one item holds."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.thread_part_sk(thread_id, digest)
    payload, pieces = blobs.split(pk, sk, data, **expiry(owner))
    return [{**key(pk, sk), _SIZE: n(len(data)), **payload, **expiry(owner)}, *pieces]


def blob_attributes(blob: Blob) -> Item:
    if blob.data is not None:
        return {_TYPE: s(blob.type), "data": b(blob.data), _SIZE: n(len(blob.data))}
    return {_TYPE: s(blob.type), _PARTS: {"L": [s(part) for part in blob.parts]}, _SIZE: n(blob.size)}


def blob_from(item: Item) -> Blob:
    if "data" in item:
        return Blob(type=get_s(item, _TYPE) or "", data=bytes(item["data"]["B"]), size=get_int(item, _SIZE))
    parts = tuple(part["S"] for part in item.get(_PARTS, {"L": []})["L"])
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
