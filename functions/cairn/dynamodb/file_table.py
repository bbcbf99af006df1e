"""`FileStore` on the single table: a file is an item of its address's partition, with its pieces beside it.

A file larger than one item keeps its bytes in pieces (`blobs`). Every
item of a file carries the file's `version`, and a write is one
transaction: the address checked, the file put only while it is still at
the version read, its pieces put, and pieces a longer earlier version left
deleted. A reader joins only pieces of the version its item names, and
reads again if a write came between the two reads. The same transaction
moves the address's count of stored bytes (`storage_usage`) by what the
write adds or frees, so a write past the address's limit changes nothing.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, checkpoint_items, keys, storage_usage, table_ops
from cairn.dynamodb.items import get_int, key, n, s
from cairn.errors import Unavailable
from cairn.files.ports import FilePage, stored_bytes

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

_VERSION = "version"
_KEY = "file_key"
_SIZE = "size"
# Writers racing on one file take turns: each reads the version again and commits over it.
_ATTEMPTS = 8


class FileTable:
    def __init__(self, client: DynamoDBClient, table: str, *, reclaim: storage_usage.Reclaim | None = None) -> None:
        """`reclaim`: what gives a full address room back (see `storage_usage.with_room`)."""
        self._client = client
        self._table = table
        self._reclaim = reclaim

    def write(self, owner: Owner, file_key: str, data: bytes, *, now: float, max_bytes: int) -> None:
        write = lambda: self._write(owner, file_key, data, now=now, max_bytes=max_bytes)  # noqa: E731
        storage_usage.with_room(self._reclaim, owner, now, write)

    def _write(self, owner: Owner, file_key: str, data: bytes, *, now: float, max_bytes: int) -> None:
        pk, sk = keys.address_pk(owner.address_id), keys.file_sk(file_key)
        for attempt in range(_ATTEMPTS):
            _pause(attempt)
            current = self._head(pk, sk)
            growth = stored_bytes(file_key, len(data)) - _stored(file_key, current)
            # A new version's name is never reused, not even by a file written again after a delete.
            version = s(uuid.uuid4().hex)
            expiry = checkpoint_items.expiry(owner)
            payload, pieces = blobs.split(pk, sk, data, version=version, **expiry)  # each piece names `_VERSION`
            item = {**key(pk, sk), _KEY: s(file_key), _SIZE: n(len(data)), _VERSION: version, **payload, **expiry}
            put: Item = {"TableName": self._table, "Item": item, **_still_at(current)}
            stale = range(len(pieces), _piece_count(current))
            actions = [
                {"Put": put},
                *({"Put": {"TableName": self._table, "Item": piece}} for piece in pieces),
                *(
                    {"Delete": {"TableName": self._table, "Key": key(pk, keys.payload_chunk_sk(sk, index))}}
                    for index in stale
                ),
            ]
            charge = storage_usage.charge(self._table, owner.address_id, growth, max_bytes=max_bytes, expiry=expiry)
            try:
                self._commit(owner, [*actions, *([charge] if charge else [])], now=now)
            except table_ops.Cancelled as cancelled:
                refused = cancelled.failed(len(actions))
                if refused is not None and cancelled.failed(0) is None:
                    raise storage_usage.refusal(refused, growth, max_bytes=max_bytes) from cancelled
                continue  # the file moved on (or a conflict): read it again
            return
        raise Unavailable("Writers kept replacing this file; retry shortly.")

    def read(self, address_id: str, file_key: str) -> bytes | None:
        pk, sk = keys.address_pk(address_id), keys.file_sk(file_key)
        for _ in range(_ATTEMPTS):
            item = self._client.get_item(TableName=self._table, Key=key(pk, sk), ConsistentRead=True).get("Item")
            if item is None:
                return None
            inline = item.get("data")
            if inline is not None:
                return bytes(inline["B"])
            version, count = item[_VERSION], _piece_count(item)
            found = [
                piece
                for piece in table_ops.query_prefix(self._client, self._table, pk, keys.payload_chunk_prefix(sk))
                if piece.get(_VERSION) == version
            ][:count]
            if len(found) == count:
                return b"".join(bytes(piece["data"]["B"]) for piece in found)
            # A write replaced the file between the two reads: read the new one.
        raise Unavailable("Writers kept replacing this file; retry shortly.")

    def delete(self, owner: Owner, file_key: str, *, now: float) -> bool:
        pk, sk = keys.address_pk(owner.address_id), keys.file_sk(file_key)
        for attempt in range(_ATTEMPTS):
            _pause(attempt)
            current = self._head(pk, sk)
            if current is None:
                return False
            freed = storage_usage.release(self._table, owner.address_id, _stored(file_key, current))
            actions = [
                {"Delete": {"TableName": self._table, "Key": key(pk, sk), **_still_at(current)}},
                *(
                    {"Delete": {"TableName": self._table, "Key": key(pk, keys.payload_chunk_sk(sk, index))}}
                    for index in range(_piece_count(current))
                ),
                freed,
            ]
            try:
                self._commit(owner, actions, now=now)
            except table_ops.Cancelled:
                continue  # the file moved on: read it again
            return True
        raise Unavailable("Writers kept replacing this file; retry shortly.")

    def keys(self, address_id: str, prefix: str, *, after: str | None, limit: int) -> FilePage:
        params: dict[str, Any] = {"ProjectionExpression": "sk", "Limit": limit}
        if after is not None:
            params["ExclusiveStartKey"] = key(keys.address_pk(address_id), keys.file_sk(after))
        found: list[str] = []
        for item in table_ops.query_prefix(
            self._client, self._table, keys.address_pk(address_id), keys.file_sk(prefix), **params
        ):
            found.append(item["sk"]["S"].removeprefix(keys.FILE_PREFIX))
            if len(found) == limit:
                break
        return FilePage(keys=tuple(found), next=found[-1] if len(found) == limit else None)

    def _head(self, pk: str, sk: str) -> Item | None:
        return self._client.get_item(
            TableName=self._table,
            Key=key(pk, sk),
            ConsistentRead=True,
            ProjectionExpression="#version, #pieces, #size",
            ExpressionAttributeNames={"#version": _VERSION, "#pieces": blobs.PIECES, "#size": _SIZE},
        ).get("Item")

    def _commit(self, owner: Owner, actions: list[Item], *, now: float) -> None:
        """Commit behind the address check: `Unauthorized` when the check failed, `Cancelled` when another did."""
        table_ops.transact_owned(self._client, checkpoint_items.address_check(self._table, owner, now=now), actions)


def _pause(attempt: int) -> None:
    """Before an attempt after the first: a short random wait, so racing writers stop meeting."""
    if attempt:
        table_ops.pause_after_conflict(attempt)


def _still_at(current: Item | None) -> Item:
    """The condition that the file is as read: at that version, or still absent."""
    if current is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {
        "ConditionExpression": "#version = :read",
        "ExpressionAttributeNames": {"#version": _VERSION},
        "ExpressionAttributeValues": {":read": current[_VERSION]},
    }


def _stored(file_key: str, current: Item | None) -> int:
    """What the file as read counts against its address's limit: nothing when there is none."""
    return stored_bytes(file_key, get_int(current, _SIZE)) if current is not None else 0


def _piece_count(item: Item | None) -> int:
    return get_int(item, blobs.PIECES) if item and blobs.PIECES in item else 0
