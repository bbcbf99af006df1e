"""`GraphStoreItems` on the single table: LangGraph store items live in their address's partition.

A put reads the item, then commits in one transaction: the address's head
checked (live, this token), the item written under the condition that it
is still at the version read, its value's pieces written and any pieces
it no longer needs deleted. A writer that another overtook reads again and
retries, unless it named the version it expected: then the item moved,
and the put is refused with `StoreVersionConflict`. The same transaction
moves the address's count of stored bytes (`storage_usage`) by what the
item counts less what it replaces. An item whose TTL has passed is absent
to every read but stays, counted, until a put that needs its room finds
the address full: that put first replaces every such item with a marker
that counts nothing, releasing its bytes, and tries once more. The items
go with their address, as every item of the partition does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys, storage_usage, table_ops
from cairn.dynamodb import graph_store_items as store_items
from cairn.dynamodb.checkpoint_items import address_check
from cairn.dynamodb.items import error_code, get_int, get_n, get_s, key, n
from cairn.errors import StoreVersionConflict, Unavailable
from cairn.graphstore.models import Namespace, PutOp, StoredItem

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

# Puts that met another writer, and reads that met a put between an item and its pieces, are tried again:
# with the pause doubling from a millisecond, a dozen tries wait up to about four seconds in all.
_ATTEMPTS = 12


class GraphStoreTable:
    def __init__(self, client: DynamoDBClient, table: str, *, max_bytes: int) -> None:
        """`max_bytes`: what an address may store in all (files, sessions, checkpoints and these)."""
        self._client = client
        self._table = table
        self._max_bytes = max_bytes

    # -- reads ---------------------------------------------------------------

    def get(self, address_id: str, namespace: Namespace, key: str) -> StoredItem | None:
        found = self._item(keys.address_pk(address_id), keys.store_item_sk(namespace, key))
        return None if found is None or store_items.is_deleted(found) else self._stored(found)

    def under(self, address_id: str, prefix: Namespace) -> Iterator[StoredItem]:
        lower = keys.store_namespace_prefix(prefix)
        for found in table_ops.query_range(
            self._client, self._table, keys.address_pk(address_id), lower, keys.upper_bound(lower)
        ):
            if store_items.is_deleted(found):
                continue
            stored = self._stored(found)
            if stored is not None:
                yield stored

    def namespaces(self, address_id: str, prefix: Namespace) -> Iterator[tuple[Namespace, float | None]]:
        lower = keys.store_namespace_prefix(prefix)
        found = table_ops.query_range(
            self._client,
            self._table,
            keys.address_pk(address_id),
            lower,
            keys.upper_bound(lower),
            ProjectionExpression="#ns, #ttl, #ends, #expires, #deleted",
            ExpressionAttributeNames={
                "#ns": store_items.NAMESPACE,
                "#ttl": store_items.TTL,
                "#ends": store_items.ENDS_AT,
                "#expires": store_items.EXPIRES_AT,
                "#deleted": store_items.DELETED,
            },
        )
        for item in found:
            if store_items.is_deleted(item):
                continue
            yield store_items.namespace_of(item), store_items.ends(item) if store_items.TTL in item else None

    def _item(self, pk: str, sk: str) -> Item | None:
        return self._client.get_item(TableName=self._table, Key=key(pk, sk), ConsistentRead=True).get("Item")

    def _stored(self, found: Item) -> StoredItem | None:
        """The item with its whole value; read again when a put replaced its pieces in between."""
        for _ in range(_ATTEMPTS):
            data = blobs.read(
                self._client, self._table, found, legacy_prefix=keys.payload_chunk_prefix(found["sk"]["S"])
            )
            stored = store_items.stored_from(found, data or b"")
            if stored is not None:
                return stored
            again = self._item(found["pk"]["S"], found["sk"]["S"])
            if again is None or store_items.is_deleted(again):
                return None
            found = again
        raise Unavailable("The item is being rewritten right now; retry shortly.")

    # -- writes --------------------------------------------------------------

    def put(self, owner: Owner, op: PutOp, *, now: float) -> int:
        return storage_usage.with_room(self.remove_ended, owner, now, lambda: self._put(owner, op, now=now))

    def _put(self, owner: Owner, op: PutOp, *, now: float) -> int:
        pk, sk = keys.address_pk(owner.address_id), keys.store_item_sk(op.namespace, op.key)
        for attempt in range(_ATTEMPTS):
            current = self._item(pk, sk)
            live = store_items.live_version(current, now)
            if op.expected_version is not None and op.expected_version != live:
                raise StoreVersionConflict(
                    "The item moved on since it was read: read it again before writing.",
                    namespace=list(op.namespace),
                    key=op.key,
                    expected_version=op.expected_version,
                    current_version=live,
                )
            if op.value is None and (current is None or store_items.is_deleted(current)):
                return 0
            writes = self._writes(owner, op, current, live, now=now)
            growth = storage_usage.counted(writes[0]["Put"]["Item"]) - storage_usage.counted(current)
            charge = storage_usage.charge(
                self._table, owner.address_id, growth, max_bytes=self._max_bytes, expiry=store_items.expires_at(owner)
            )
            try:
                table_ops.transact_owned(
                    self._client, address_check(self._table, owner, now=now), [*writes, *([charge] if charge else [])]
                )
                return 0 if op.value is None else store_items.stored_version(current) + 1
            except table_ops.Cancelled as cancelled:
                refused = cancelled.failed(len(writes))
                if refused is not None and cancelled.failed(0) is None:
                    raise storage_usage.refusal(refused, growth, max_bytes=self._max_bytes) from cancelled
            # Another writer committed between the read and this commit: read what it left, and decide again.
            table_ops.pause_after_conflict(attempt)
        raise Unavailable("The item is too busy right now; retry shortly.")

    def _writes(self, owner: Owner, op: PutOp, current: Item | None, live: int, *, now: float) -> list[Item]:
        """The item's put (or delete) under the version read, its pieces, and the deletion of pieces it leaves."""
        pk, sk = keys.address_pk(owner.address_id), keys.store_item_sk(op.namespace, op.key)
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if current is not None:
            condition = _at_version(get_int(current, store_items.VERSION))
        written: list[Item] = []
        # Versions go on from the key's last, through deletes and expiries, so a writer that read an
        # earlier item under the key never matches the one made after it.
        version = store_items.stored_version(current) + 1
        if op.value is None:
            gone = store_items.tombstone(owner, op.namespace, op.key, version=version, now=now)
            actions = [{"Put": {"TableName": self._table, "Item": gone, **condition}}]
        else:
            created_at = get_n(current, "created_at") if current is not None and live else None
            written = store_items.item_put(owner, op, op.value, version=version, created_at=created_at or now, now=now)
            actions = [{"Put": {"TableName": self._table, "Item": written[0], **condition}}]
            actions += [{"Put": {"TableName": self._table, "Item": piece}} for piece in written[1:]]
        kept = {piece["sk"]["S"] for piece in written[1:]}
        actions += [
            {"Delete": {"TableName": self._table, "Key": key(pk, stale)}}
            for stale in self._piece_keys(pk, sk, current)
            if stale not in kept
        ]
        return actions

    def remove_ended(self, owner: Owner, now: float) -> bool:
        """Replace each of the address's items whose TTL has passed with a marker, releasing what it counted.

        Each goes in a transaction of its own, under the condition that it
        is still at the version read; one a writer replaced meanwhile is
        left as it is. Whether any bytes were released.
        """
        pk = keys.address_pk(owner.address_id)
        lower = keys.store_namespace_prefix(())
        released = False
        # What deciding and releasing takes, without the values.
        outline = {
            "ProjectionExpression": "pk, sk, #ns, #key, #version, #ttl, #ends, #expires, #deleted, #counted, #pieces",
            "ExpressionAttributeNames": {
                "#ns": store_items.NAMESPACE,
                "#key": store_items.KEY,
                "#version": store_items.VERSION,
                "#ttl": store_items.TTL,
                "#ends": store_items.ENDS_AT,
                "#expires": store_items.EXPIRES_AT,
                "#deleted": store_items.DELETED,
                "#counted": storage_usage.COUNTED,
                "#pieces": blobs.PIECES,
            },
        }
        for found in table_ops.query_range(self._client, self._table, pk, lower, keys.upper_bound(lower), **outline):
            if store_items.is_deleted(found) or not store_items.has_ended(found, now):
                continue
            freed = storage_usage.counted(found)
            if not freed:
                continue  # put before items were counted: DynamoDB's TTL removes it
            version = store_items.stored_version(found)
            gone = store_items.tombstone(
                owner, store_items.namespace_of(found), store_items.key_of(found), version=version + 1, now=now
            )
            actions = [
                {"Put": {"TableName": self._table, "Item": gone, **_at_version(version)}},
                storage_usage.release(self._table, owner.address_id, freed),
                *(
                    {"Delete": {"TableName": self._table, "Key": key(pk, piece)}}
                    for piece in self._piece_keys(pk, found["sk"]["S"], found)
                ),
            ]
            try:
                table_ops.transact_write(self._client, actions)
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                continue  # a writer came first: what it left counts as it should
            released = True
        return released

    def _piece_keys(self, pk: str, sk: str, current: Item | None) -> list[str]:
        """The pieces stored under the item's key: its own, or, with no item, any an expired one left."""
        if current is not None and not store_items.piece_count(current):
            return []
        found = table_ops.query_prefix(
            self._client, self._table, pk, keys.payload_chunk_prefix(sk), ProjectionExpression="sk"
        )
        return [get_s(piece, "sk") or "" for piece in found]

    def refresh(self, owner: Owner, item: StoredItem, *, now: float) -> None:
        assert item.ttl_minutes is not None  # only an item put with a TTL is refreshed
        lifetime = store_items.expires_at(owner)
        # An item put before `ENDS_AT` kept its end in DynamoDB's TTL attribute: it now lives as its address does.
        update = "SET #ends = :ends, #expires = :expires" if lifetime else "SET #ends = :ends REMOVE #expires"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(owner.address_id), keys.store_item_sk(item.namespace, item.key)),
                UpdateExpression=update,
                ConditionExpression="#version = :version",
                ExpressionAttributeNames={
                    "#ends": store_items.ENDS_AT,
                    "#expires": store_items.EXPIRES_AT,
                    "#version": store_items.VERSION,
                },
                ExpressionAttributeValues={
                    ":ends": store_items.ends_at(item.ttl_minutes, owner, now=now)[store_items.ENDS_AT],
                    ":version": n(item.version),
                    **({":expires": lifetime[store_items.EXPIRES_AT]} if lifetime else {}),
                },
            )
        except ClientError as error:
            # A put or a delete came first: the item it left has its own lifetime.
            if error_code(error) != "ConditionalCheckFailedException":
                raise


def _at_version(version: int) -> Item:
    """The condition that an item is still at the version read."""
    return {
        "ConditionExpression": "#version = :version",
        "ExpressionAttributeNames": {"#version": store_items.VERSION},
        "ExpressionAttributeValues": {":version": n(version)},
    }
