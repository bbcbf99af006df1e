"""Held reads of a feed (event streams, waiting long-polls) counted per address on its head.

A held read keeps a Lambda invocation (or a `cairn serve` thread) busy for up
to its whole duration, so one address must not hold many at once: a few
hundred streams from one client would take the streaming function's
reserved concurrency from every other address. Each held read is a lease,
an entry of a map on the address head (`held_<kind>`: lease id → the epoch
second it lapses), taken by one conditional `UpdateItem` that requires the
map to be smaller than the cap, and removed when the read ends. A holder
that dies without removing its lease (a killed container) frees the slot
when the lease lapses: a refused take removes lapsed leases and tries again.

The head is a hot item (every append's transaction conditions on it), so a
take that meets a transaction in flight retries with a short back-off, as
the counted read does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.address_items import DELETED
from cairn.dynamodb.items import error_code, key, n
from cairn.errors import Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_ATTEMPTS = 8

Item = dict[str, Any]


def _map_name(kind: str) -> str:
    return f"held_{kind}"


def _epoch(value: Item) -> int:
    return int(value["N"])


class ReadLeases:
    """`cairn.addresses.ports.ReadLeases` on the address head."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def hold(self, address_id: str, kind: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        """Take lease `lease` of `kind` until `until` if the address holds fewer than `cap`.

        None once taken; otherwise the seconds until the earliest lease lapses.
        Raises `Unauthorized` when the address is gone (deleted meanwhile).
        """
        head_key = key(keys.address_pk(address_id), keys.META)
        names = {"#held": _map_name(kind), "#lease": lease, "#deleted": DELETED}
        for attempt in range(_ATTEMPTS):
            head: Item | None
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=head_key,
                    UpdateExpression="SET #held.#lease = :until",
                    # A head without the map fails here and comes back to have the map made.
                    ConditionExpression=(
                        "attribute_exists(pk) AND attribute_not_exists(#deleted)"
                        " AND attribute_exists(#held) AND size(#held) < :cap"
                    ),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":until": n(math.ceil(until)), ":cap": n(cap)},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return None
            except ClientError as error:
                if not table_ops.condition_failed(error, attempt):
                    continue
                # The head as the condition saw it (ALL_OLD); a store that returns none is read instead.
                head = error.response.get("Item") or self._read(head_key)  # type: ignore[assignment]
            if not head or DELETED in head:
                raise Unauthorized()
            if _map_name(kind) not in head:
                if self._start_map(head_key, names, lease, until):
                    return None
                continue
            held = head[_map_name(kind)].get("M", {})
            lapsed = {name: value for name, value in held.items() if _epoch(value) <= now}
            if not lapsed:
                earliest = min((_epoch(value) for value in held.values()), default=math.ceil(now))
                return max(1, math.ceil(earliest - now))
            self._remove_lapsed(head_key, kind, lapsed)
        raise Unavailable("The address is too busy right now; retry shortly.")

    def release(self, address_id: str, kind: str, lease: str) -> None:
        """End a held read: its slot is free at once (a deleted address has nothing to free)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(address_id), keys.META),
                UpdateExpression="REMOVE #held.#lease",
                ConditionExpression="attribute_exists(#held.#lease)",
                ExpressionAttributeNames={"#held": _map_name(kind), "#lease": lease},
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def _start_map(self, head_key: Item, names: dict[str, str], lease: str, until: float) -> bool:
        """Make the map with this lease in it; False when another taker made it first."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=head_key,
                UpdateExpression="SET #held = :one",
                ConditionExpression=(
                    "attribute_exists(pk) AND attribute_not_exists(#deleted) AND attribute_not_exists(#held)"
                ),
                ExpressionAttributeNames={name: value for name, value in names.items() if name != "#lease"},
                ExpressionAttributeValues={":one": {"M": {lease: n(math.ceil(until))}}},
            )
        except ClientError as error:
            if error_code(error) in ("ConditionalCheckFailedException", "TransactionConflictException"):
                return False  # the next try reads the head again and tells why
            raise
        return True

    def _read(self, head_key: Item) -> Item | None:
        return self._client.get_item(TableName=self._table, Key=head_key, ConsistentRead=True).get("Item")

    def _remove_lapsed(self, head_key: Item, kind: str, lapsed: dict[str, Any]) -> None:
        """Remove leases whose holders are gone; each only if it still lapses when removed."""
        names = {"#held": _map_name(kind)}
        values: dict[str, Any] = {}
        removes, conditions = [], []
        for index, (name, value) in enumerate(lapsed.items()):
            names[f"#l{index}"] = name
            values[f":l{index}"] = value
            removes.append(f"#held.#l{index}")
            conditions.append(f"#held.#l{index} = :l{index}")
        try:
            self._client.update_item(
                TableName=self._table,
                Key=head_key,
                UpdateExpression="REMOVE " + ", ".join(removes),
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            # Another taker removed them first, or a transaction holds the head: the next try reads again.
            if error_code(error) not in ("ConditionalCheckFailedException", "TransactionConflictException"):
                raise
