"""An address's stored bytes (its files and agent sessions), counted on one item of its partition and moved
in each write's commit.

A write that grows what an address stores adds its growth to the count
under the condition that the sum stays within the limit; one that shrinks
it (a smaller replacement, a delete) subtracts, unconditionally. Either is
an action of the write's own transaction, so the count is always the sum of
what is stored, whatever runs at once, and a write the limit refuses
changes nothing.
"""

from __future__ import annotations

from typing import Any

from cairn.dynamodb import keys
from cairn.dynamodb.items import get_int, key, n
from cairn.errors import StorageLimitExceeded

Item = dict[str, Any]

_BYTES = "stored_bytes"


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
    """The action taking `freed` bytes (what a delete removes) off the count: never refused."""
    return _moved(table, address_id, -freed, {})


def refusal(reason: Item, growth: int, *, max_bytes: int) -> StorageLimitExceeded:
    """The error for a write whose `charge` failed its condition (`reason`, with the count as it was)."""
    return _refused(get_int(reason.get("Item") or {}, _BYTES), growth, max_bytes)


def _refused(used: int | None, growth: int, max_bytes: int) -> StorageLimitExceeded:
    stored = "" if used is None else f" stores {used} of its {max_bytes} bytes, and"
    return StorageLimitExceeded(
        f"This write needs {growth} more bytes: the address{stored} may store {max_bytes} in all "
        "(its files and agent sessions, counted with their keys).",
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
