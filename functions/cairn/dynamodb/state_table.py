"""State of an address: one item per key plus one usage item, in the single table.

Each key item carries its own revision, so writes to different keys never
conflict. The usage item (`STATE`) holds the address's key and byte totals;
writes move it with `ADD` under a condition computed from the limit
(`bytes <= max - delta`), which keeps the limit exact under concurrency
without a read inside the transaction. Deleted keys stay as tombstones that
remember their last revision, so a recreated key never reuses a number.

Writes are actions of the address's append transaction (`change_actions`),
so every change commits with its `state.updated` event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.addresses.state_model import KeyChange, StateChanges, StateEntry, StateSnapshot, StateUsage, usage_delta
from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.address_items import record_from_item
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.errors import Unavailable

Item = dict[str, Any]


class StateTable:
    """Consistent reads of address state (`cairn.addresses.ports.StateStore`)."""

    def __init__(self, client, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def read(self, address_id: str, state_keys: Iterable[str]) -> StateSnapshot:
        """Head, usage and the given keys in one consistent batch read."""
        pk = keys.address_pk(address_id)
        wanted = [key(pk, keys.META), key(pk, keys.STATE)] + [key(pk, keys.state_key_sk(k)) for k in state_keys]
        items = {
            item["sk"]["S"]: item
            for item in table_ops.batch_get(
                self._client,
                self._table,
                wanted,
                exhausted=lambda: Unavailable("State reads are throttled; retry shortly."),
            )
        }
        head_item = items.pop(keys.META, None)
        usage_item = items.pop(keys.STATE, None)
        return StateSnapshot(
            head=record_from_item(head_item) if head_item else None,
            entries={entry.key: entry for entry in map(_entry_from_item, items.values())},
            usage=_usage_from_item(usage_item),
        )

    def read_all(self, address_id: str) -> tuple[dict[str, StateEntry], StateUsage]:
        """Every key item (tombstones included) and the usage, in one query."""
        entries: dict[str, StateEntry] = {}
        usage_item = None
        pk = keys.address_pk(address_id)
        for item in table_ops.query_prefix(self._client, self._table, pk, keys.STATE_PREFIX):
            if item["sk"]["S"] == keys.STATE:
                usage_item = item
            else:
                entry = _entry_from_item(item)
                entries[entry.key] = entry
        return entries, _usage_from_item(usage_item)

    def usage(self, address_id: str) -> StateUsage:
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.STATE),
            ConsistentRead=True,
        )
        return _usage_from_item(response.get("Item"))


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


def _entry_from_item(item: Item) -> StateEntry:
    return StateEntry(
        key=keys.state_key_of(item["sk"]["S"]),
        revision=get_int(item, "revision"),
        size=get_int(item, "size"),
        updated_at=get_n(item, "updated_at") or 0.0,
        value_json=get_s(item, "value"),
    )


def _usage_from_item(item: Item | None) -> StateUsage:
    if not item:
        return StateUsage()
    return StateUsage(keys=get_int(item, "keys"), bytes=get_int(item, "bytes"))
