"""State of an address: one item per key plus one usage item, in the single table.

Each key item carries its own revision, so writes to different keys never
conflict. The usage item (`STATE`) holds the address's key and byte totals;
writes move it with `ADD` under a condition computed from the limit
(`bytes <= max - delta`), which keeps the limit exact under concurrency
without a read inside the transaction. Deleted keys stay as tombstones that
remember their last revision, so a recreated key never reuses a number.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cairn.addresses.models import AddressRecord
from cairn.dynamodb import keys
from cairn.dynamodb.address_table import record_from_item
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.errors import Unavailable


@dataclass(frozen=True)
class StateEntry:
    """A key's current item; `value_json` is None for a deleted key (tombstone)."""

    key: str
    revision: int
    size: int
    updated_at: float
    value_json: str | None

    @property
    def exists(self) -> bool:
        return self.value_json is not None

    @property
    def value(self) -> Any:
        return json.loads(self.value_json) if self.value_json is not None else None


@dataclass(frozen=True)
class StateUsage:
    keys: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class StateSnapshot:
    """What one consistent read saw: the head, the entries asked for, the usage."""

    head: AddressRecord | None
    entries: dict[str, StateEntry]
    usage: StateUsage


@dataclass(frozen=True)
class KeyChange:
    """A planned write of one key: `value_json` None deletes it."""

    key: str
    previous: StateEntry | None
    revision: int
    size: int
    value_json: str | None


@dataclass(frozen=True)
class StateLimits:
    max_keys: int
    max_bytes: int


class StateTable:
    def __init__(self, client, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def read(self, address_id: str, state_keys: Iterable[str]) -> StateSnapshot:
        """Head, usage and the given keys in one consistent batch read."""
        pk = keys.address_pk(address_id)
        wanted = [key(pk, keys.META), key(pk, keys.STATE)] + [key(pk, keys.state_key_sk(k)) for k in state_keys]
        items = self._batch_get(wanted)
        head_item = items.pop(keys.META, None)
        usage_item = items.pop(keys.STATE, None)
        return StateSnapshot(
            head=record_from_item(head_item) if head_item else None,
            entries={entry.key: entry for entry in map(_entry_from_item, items.values())},
            usage=_usage_from_item(usage_item),
        )

    def read_all(self, address_id: str) -> tuple[dict[str, StateEntry], StateUsage]:
        """Every key item (tombstones included) and the usage, in one query."""
        params: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :state)",
            "ExpressionAttributeValues": {":pk": s(keys.address_pk(address_id)), ":state": s(keys.STATE_PREFIX)},
        }
        entries: dict[str, StateEntry] = {}
        usage_item = None
        while True:
            response = self._client.query(**params)
            for item in response.get("Items", []):
                if item["sk"]["S"] == keys.STATE:
                    usage_item = item
                else:
                    entry = _entry_from_item(item)
                    entries[entry.key] = entry
            if "LastEvaluatedKey" not in response:
                return entries, _usage_from_item(usage_item)
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def usage(self, address_id: str) -> StateUsage:
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.STATE),
            ConsistentRead=True,
        )
        return _usage_from_item(response.get("Item"))

    def change_actions(
        self,
        address_id: str,
        changes: list[KeyChange],
        *,
        limits: StateLimits,
        now: float,
        expires_at: float | None,
    ) -> list[dict[str, Any]]:
        """Transaction actions for the changes and the usage they cause."""
        pk = keys.address_pk(address_id)
        actions = [self._key_action(pk, change, now, expires_at) for change in changes]
        delta = usage_delta(changes)
        if delta.bytes or delta.keys:
            actions.append(self._usage_action(pk, delta.bytes, delta.keys, limits, expires_at))
        return actions

    def _key_action(self, pk: str, change: KeyChange, now: float, expires_at: float | None) -> dict[str, Any]:
        names = {"#rev": "revision", "#size": "size", "#at": "updated_at"}
        values: dict[str, Any] = {":rev": n(change.revision), ":size": n(change.size), ":at": n(round(now, 3))}
        sets = ["#rev = :rev", "#size = :size", "#at = :at"]
        removes = []
        if change.value_json is None:
            removes.append("#value")
        else:
            sets.append("#value = :value")
            values[":value"] = s(change.value_json)
        names["#value"] = "value"
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
                "TableName": self._table,
                "Key": key(pk, keys.state_key_sk(change.key)),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _usage_action(
        self, pk: str, byte_delta: int, key_delta: int, limits: StateLimits, expires_at: float | None
    ) -> dict[str, Any]:
        values: dict[str, Any] = {":db": n(byte_delta), ":dk": n(key_delta)}
        conditions = []
        # Growth must still fit after every concurrent writer's growth: the
        # limit minus this delta is the most the totals may hold beforehand.
        if byte_delta > 0:
            conditions.append("(attribute_not_exists(#bytes) OR #bytes <= :bytes_room)")
            values[":bytes_room"] = n(limits.max_bytes - byte_delta)
        if key_delta > 0:
            conditions.append("(attribute_not_exists(#keys) OR #keys <= :keys_room)")
            values[":keys_room"] = n(limits.max_keys - key_delta)
        expression = "ADD #bytes :db, #keys :dk"
        if expires_at is not None:
            expression += " SET expires_at = :expires"
            values[":expires"] = n(int(expires_at))
        action: dict[str, Any] = {
            "TableName": self._table,
            "Key": key(pk, keys.STATE),
            "UpdateExpression": expression,
            "ExpressionAttributeNames": {"#bytes": "bytes", "#keys": "keys"},
            "ExpressionAttributeValues": values,
        }
        if conditions:
            action["ConditionExpression"] = " AND ".join(conditions)
        return {"Update": action}

    def _batch_get(self, item_keys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Items by sort key; BatchGetItem may leave some for a second round."""
        found: dict[str, dict[str, Any]] = {}
        pending: dict[str, Any] = {self._table: {"Keys": item_keys, "ConsistentRead": True}}
        for attempt in range(10):
            response = self._client.batch_get_item(RequestItems=pending)
            for item in response.get("Responses", {}).get(self._table, []):
                found[item["sk"]["S"]] = item
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                return found
            time.sleep(0.02 * (attempt + 1))
        raise Unavailable("State reads are throttled; retry shortly.")


def _entry_from_item(item: dict[str, Any]) -> StateEntry:
    return StateEntry(
        key=item["sk"]["S"].removeprefix("S#"),
        revision=get_int(item, "revision"),
        size=get_int(item, "size"),
        updated_at=get_n(item, "updated_at") or 0.0,
        value_json=get_s(item, "value"),
    )


def _usage_from_item(item: dict[str, Any] | None) -> StateUsage:
    if not item:
        return StateUsage()
    return StateUsage(keys=get_int(item, "keys"), bytes=get_int(item, "bytes"))


def usage_delta(changes: list[KeyChange]) -> StateUsage:
    """How many keys and bytes the changes add (negative when they free some)."""
    keys_delta = bytes_delta = 0
    for change in changes:
        before = change.previous if change.previous is not None and change.previous.exists else None
        keys_delta += (change.value_json is not None) - (before is not None)
        bytes_delta += change.size - (before.size if before is not None else 0)
    return StateUsage(keys=keys_delta, bytes=bytes_delta)
