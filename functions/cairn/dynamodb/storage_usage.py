"""An address's stored bytes (its files, agent sessions and LangGraph data), counted on one item of its
partition and moved in each write's commit.

A write that grows what an address stores adds its growth to the count
under the condition that the sum stays within the limit; one that shrinks
it (a smaller replacement, a delete) subtracts, on the one condition that
the count is still there: an address's deletion removes it with the rest,
and a delete racing that deletion must not make it again. Either is an
action of the write's own transaction, so the count is always the sum of
what is stored, whatever runs at once, and a write the limit refuses
changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import ClientError

from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, key, n
from cairn.errors import StorageLimitExceeded

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

    from cairn.checkpoints.models import Owner

Item = dict[str, Any]
T = TypeVar("T")
# Gives a full address room back, whether any: its LangGraph store items whose TTL has passed, which
# count until something removes them (`GraphStoreTable.remove_ended`).
Reclaim = Callable[["Owner", float], bool]

_BYTES = "stored_bytes"
# On an item that keeps what it counts (a checkpoint's, say): a deletion releases exactly that.
COUNTED = "counted"
# DynamoDB's own overhead on an item, counted with each item and each piece.
ROW_OVERHEAD = 128
# Deletions per transaction, beside the release of what they counted (DynamoDB: 100 actions).
_DELETES = 99
_ATTEMPTS = 10


def with_room(reclaim: Reclaim | None, owner: Owner, now: float, write: Callable[[], T]) -> T:
    """`write()`, and once more when the address was full and `reclaim` gave room back.

    Without it, store items no read could see any more refused a file, a
    session or a checkpoint the room they held.
    """
    try:
        return write()
    except StorageLimitExceeded:
        if reclaim is None or not reclaim(owner, now):
            raise
    return write()


def charge(table: str, address_id: str, growth: int, *, max_bytes: int, expiry: Item) -> Item | None:
    """The action moving the count by `growth` bytes (None for none); a growth past `max_bytes` fails its condition.

    `expiry`: the address's, which the count takes as the items it counts do.
    """
    if growth <= 0:
        return _moved(table, address_id, growth, expiry) if growth else None
    if growth > max_bytes:
        # Past the limit on its own: refused without a commit, as no count could take it.
        raise _refused(None, growth, max_bytes)
    action = _moved(table, address_id, growth, expiry)
    update = action["Update"]
    update["ConditionExpression"] = "attribute_not_exists(#bytes) OR #bytes <= :room"
    update["ExpressionAttributeValues"][":room"] = n(max_bytes - growth)
    update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return action


def release(table: str, address_id: str, freed: int) -> Item:
    """The action taking `freed` bytes (what a delete removes) off the count.

    Refused only where there is no count, which its address's deletion
    removed (`count_gone`): a delete racing that deletion would make it again,
    below zero and never expiring.
    """
    action = _moved(table, address_id, -freed, {})
    action["Update"]["ConditionExpression"] = "attribute_exists(#bytes)"
    return action


def count_gone(reasons: Sequence[Item], index: int) -> bool:
    """Whether the `release` at `index` of a cancelled transaction found no count: its address is being deleted."""
    return table_ops.failed_at(reasons, index)


def with_count(item: Item, pieces: Sequence[Item] = ()) -> Item:
    """The item with its `COUNTED`: its attributes' values (key, value, metadata, ids) and `ROW_OVERHEAD`,
    and its `pieces` (stored beside it on its behalf) as their bytes and `ROW_OVERHEAD` each."""
    size = sum(value_bytes(value) for name, value in item.items() if name not in ("pk", COUNTED))
    beside = sum(len(piece["data"]["B"]) + ROW_OVERHEAD for piece in pieces)
    return {**item, COUNTED: n(size + ROW_OVERHEAD + beside)}


def value_bytes(value: Item) -> int:
    """What one attribute value takes in DynamoDB: strings as UTF-8, binaries as their bytes."""
    (kind, content), *_ = value.items()
    if kind == "S":
        return len(content.encode())
    if kind == "B":
        return len(content)
    if kind == "L":
        return sum(value_bytes(element) for element in content)
    return len(str(content))


def counted(item: Item | None) -> int:
    """What an item that keeps its `COUNTED` counts (nothing for one stored before it was counted)."""
    return get_int(item, COUNTED) if item else 0


def delete_counted(
    client: DynamoDBClient, table: str, address_id: str, items: Sequence[Item], *, exhausted: Callable[[], Exception]
) -> None:
    """Delete `items` (their keys and `COUNTED`), releasing what they count in the same transactions.

    Each deletion of an item that counts holds only while the item is as
    read, so of two deletions racing for it one releases its bytes; an item
    found gone (or replaced) is left to whoever took it. Once the address's
    count is found gone (`count_gone`), nothing more is deleted here.
    """
    for start in range(0, len(items), _DELETES):
        pending = list(items[start : start + _DELETES])
        for attempt in range(_ATTEMPTS):
            freed = sum(counted(item) for item in pending)
            actions = [counted_deletion(table, item) for item in pending]
            actions += [release(table, address_id, freed)] if freed else []
            try:
                table_ops.transact_write(client, actions)
                break
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(error)
            if freed and count_gone(reasons, len(pending)):
                return  # the address is being deleted, and its deletion removes the rest
            taken = {index for index, reason in enumerate(reasons) if reason.get("Code") == table_ops.CONDITION_FAILED}
            if not taken:
                table_ops.pause_after_conflict(attempt)
            pending = [item for index, item in enumerate(pending) if index not in taken]
            if not pending:
                break
        else:
            raise exhausted()


def counted_deletion(table: str, item: Item) -> Item:
    """The deletion of an item, under the condition that it still counts as read when it counts at all."""
    deletion: Item = {"TableName": table, "Key": {"pk": item["pk"], "sk": item["sk"]}}
    return {"Delete": {**deletion, **still_counting(item)} if COUNTED in item else deletion}


def still_counting(item: Item) -> Item:
    """The condition that an item which keeps its `COUNTED` still counts what it did when read."""
    return {
        "ConditionExpression": "#counted = :counted",
        "ExpressionAttributeNames": {"#counted": COUNTED},
        "ExpressionAttributeValues": {":counted": item[COUNTED]},
    }


def refusal(reason: Item, growth: int, *, max_bytes: int) -> StorageLimitExceeded:
    """The error for a write whose `charge` failed its condition (`reason`, with the count as it was)."""
    return _refused(get_int(reason.get("Item") or {}, _BYTES), growth, max_bytes)


def _refused(used: int | None, growth: int, max_bytes: int) -> StorageLimitExceeded:
    stored = "" if used is None else f" stores {used} of its {max_bytes} bytes, and"
    return StorageLimitExceeded(
        f"This write needs {growth} more bytes: the address{stored} may store {max_bytes} in all "
        "(its files, agent sessions and LangGraph checkpoints and store items, counted with their keys).",
        max_bytes=max_bytes,
        needed_bytes=growth,
        **({} if used is None else {"used_bytes": used}),
    )


def _moved(table: str, address_id: str, growth: int, expiry: Item) -> Item:
    expires = {":expires": expiry["expires_at"]} if expiry else {}
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.address_pk(address_id), keys.STORAGE_USAGE),
            "UpdateExpression": "ADD #bytes :growth" + (" SET expires_at = :expires" if expires else ""),
            "ExpressionAttributeNames": {"#bytes": _BYTES},
            "ExpressionAttributeValues": {":growth": n(growth), **expires},
        }
    }
