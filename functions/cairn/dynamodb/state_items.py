"""Address state as items and transaction actions, and back.

One item per key (`S#<key>`: revision, size, time, canonical JSON value;
a tombstone has no value) and one usage item (`STATE`: key and byte
totals). The only place that knows these attribute names.
"""

from __future__ import annotations

from typing import Any

from cairn.addresses.state_model import KeyChange, StateChanges, StateEntry, StateUsage, usage_delta
from cairn.dynamodb import keys
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s

Item = dict[str, Any]


def change_actions(table: str, address_id: str, state: StateChanges, *, now: float) -> list[Item]:
    """Transaction actions for the key changes and the usage they cause.

    Each action's condition holds only while its key (or the usage) is what
    the changes were planned from.
    """
    pk = keys.address_pk(address_id)
    actions = [_key_action(table, pk, change, now, state.expires_at) for change in state.changes]
    delta = usage_delta(state.changes)
    if delta.bytes or delta.keys:
        actions.append(_usage_action(table, pk, delta, state))
    return actions


def _key_action(table: str, pk: str, change: KeyChange, now: float, expires_at: float | None) -> Item:
    names = {"#rev": "revision", "#size": "size", "#at": "updated_at", "#value": "value"}
    values: dict[str, Any] = {":rev": n(change.revision), ":size": n(change.size), ":at": n(round(now, 3))}
    sets = ["#rev = :rev", "#size = :size", "#at = :at"]
    removes = []
    if change.value_json is None:
        removes.append("#value")
    else:
        sets.append("#value = :value")
        values[":value"] = s(change.value_json)
    if expires_at is not None:
        sets.append("expires_at = :expires")
        values[":expires"] = n(int(expires_at))
    if change.previous is None:
        condition = "attribute_not_exists(pk)"
    else:
        condition = "#rev = :expected"
        values[":expected"] = n(change.previous.revision)
    expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
    return {
        "Update": {
            "TableName": table,
            "Key": key(pk, keys.state_key_sk(change.key)),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def _usage_action(table: str, pk: str, delta: StateUsage, state: StateChanges) -> Item:
    values: dict[str, Any] = {":db": n(delta.bytes), ":dk": n(delta.keys)}
    conditions = []
    # Growth must still fit after every concurrent writer's growth: the
    # limit minus this delta is the most the totals may hold beforehand.
    if delta.bytes > 0:
        conditions.append("(attribute_not_exists(#bytes) OR #bytes <= :bytes_room)")
        values[":bytes_room"] = n(state.limits.max_bytes - delta.bytes)
    if delta.keys > 0:
        conditions.append("(attribute_not_exists(#keys) OR #keys <= :keys_room)")
        values[":keys_room"] = n(state.limits.max_keys - delta.keys)
    expression = "ADD #bytes :db, #keys :dk"
    if state.expires_at is not None:
        expression += " SET expires_at = :expires"
        values[":expires"] = n(int(state.expires_at))
    action: Item = {
        "TableName": table,
        "Key": key(pk, keys.STATE),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": {"#bytes": "bytes", "#keys": "keys"},
        "ExpressionAttributeValues": values,
    }
    if conditions:
        action["ConditionExpression"] = " AND ".join(conditions)
    return {"Update": action}


def entry_from_item(item: Item) -> StateEntry:
    return StateEntry(
        key=keys.state_key_of(item["sk"]["S"]),
        revision=get_int(item, "revision"),
        size=get_int(item, "size"),
        updated_at=get_n(item, "updated_at") or 0.0,
        value_json=get_s(item, "value"),
    )


def usage_from_item(item: Item | None) -> StateUsage:
    if not item:
        return StateUsage()
    return StateUsage(keys=get_int(item, "keys"), bytes=get_int(item, "bytes"))
