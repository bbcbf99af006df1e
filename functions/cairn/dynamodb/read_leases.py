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

One client may also hold only so many across every address (it can make
addresses at will): the same map on an item of its own (`CLIENT#<client>`),
which the first take makes and which expires a day after the last one.
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


# The one kind a client's item counts: every held read, whatever its kind.
CLIENT_KIND = "reads"


def _map_name(kind: str) -> str:
    return f"held_{kind}"


def _epoch(value: Item) -> int:
    return int(value["N"])


# A client's item outlives its longest lease (an event stream: under 15 minutes) by far.
_CLIENT_ITEM_SECONDS = 86_400


class ReadLeases:
    """`cairn.addresses.ports.ReadLeases` on the address head, and on each client's item."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def hold(self, address_id: str, kind: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        """Take lease `lease` of `kind` until `until` if the address holds fewer than `cap`.

        None once taken; otherwise the seconds until the earliest lease lapses.
        Raises `Unauthorized` when the address is gone (deleted meanwhile).
        """
        head = _Holder(
            key(keys.address_pk(address_id), keys.META),
            _map_name(kind),
            live="attribute_exists(pk) AND attribute_not_exists(#deleted)",
            names={"#deleted": DELETED},
        )
        return self._take(head, lease, until=until, cap=cap, now=now)

    def release(self, address_id: str, kind: str, lease: str) -> None:
        """End a held read: its slot is free at once (a deleted address has nothing to free)."""
        self._remove(key(keys.address_pk(address_id), keys.META), _map_name(kind), lease)

    def hold_for_client(self, client: str, lease: str, *, until: float, cap: int, now: float) -> int | None:
        """Take lease `lease` until `until` if `client` holds fewer than `cap` reads across every address."""
        item = _Holder(
            key(keys.client_pk(client), keys.HELD_READS),
            _map_name(CLIENT_KIND),
            expires=n(math.ceil(now) + _CLIENT_ITEM_SECONDS),
        )
        return self._take(item, lease, until=until, cap=cap, now=now)

    def release_for_client(self, client: str, lease: str) -> None:
        self._remove(key(keys.client_pk(client), keys.HELD_READS), _map_name(CLIENT_KIND), lease)

    def _take(self, holder: _Holder, lease: str, *, until: float, cap: int, now: float) -> int | None:
        names = {"#held": holder.map_name, "#lease": lease, **holder.names}
        for attempt in range(_ATTEMPTS):
            found: Item | None
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=holder.key,
                    UpdateExpression="SET #held.#lease = :until" + holder.refresh,
                    # An item without the map fails here and comes back to have the map made.
                    ConditionExpression=holder.condition("attribute_exists(#held) AND size(#held) < :cap"),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":until": n(math.ceil(until)), ":cap": n(cap), **holder.values},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return None
            except ClientError as error:
                if not table_ops.condition_failed(error, attempt):
                    continue
                # The item as the condition saw it (ALL_OLD): none when there is no item, so a client's first
                # take of the day makes its item at once, with no read between.
                found = error.response.get("Item")  # type: ignore[assignment]
            if holder.must_exist and (not found or DELETED in found):
                raise Unauthorized()
            if not found or holder.map_name not in found:
                if self._start_map(holder, names, lease, until):
                    return None
                continue
            held = found[holder.map_name].get("M", {})
            lapsed = {name: value for name, value in held.items() if _epoch(value) <= now}
            if not lapsed:
                earliest = min((_epoch(value) for value in held.values()), default=math.ceil(now))
                return max(1, math.ceil(earliest - now))
            self._remove_lapsed(holder, lapsed)
        raise Unavailable("The address is too busy right now; retry shortly.")

    def _remove(self, item_key: Item, map_name: str, lease: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=item_key,
                UpdateExpression="REMOVE #held.#lease",
                ConditionExpression="attribute_exists(#held.#lease)",
                ExpressionAttributeNames={"#held": map_name, "#lease": lease},
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def _start_map(self, holder: _Holder, names: dict[str, str], lease: str, until: float) -> bool:
        """Make the map with this lease in it; False when another taker made it first."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=holder.key,
                UpdateExpression="SET #held = :one" + holder.refresh,
                ConditionExpression=holder.condition("attribute_not_exists(#held)"),
                ExpressionAttributeNames={name: value for name, value in names.items() if name != "#lease"},
                ExpressionAttributeValues={":one": {"M": {lease: n(math.ceil(until))}}, **holder.values},
            )
        except ClientError as error:
            if error_code(error) in ("ConditionalCheckFailedException", "TransactionConflictException"):
                return False  # the next try reads the item again and tells why
            raise
        return True

    def _remove_lapsed(self, holder: _Holder, lapsed: dict[str, Any]) -> None:
        """Remove leases whose holders are gone; each only if it still lapses when removed."""
        names = {"#held": holder.map_name}
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
                Key=holder.key,
                UpdateExpression="REMOVE " + ", ".join(removes),
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            # Another taker removed them first, or a transaction holds the item: the next try reads again.
            if error_code(error) not in ("ConditionalCheckFailedException", "TransactionConflictException"):
                raise


class _Holder:
    """The item whose map counts the leases: an address head (which must exist, undeleted), or a
    client's item (made by its first take, and kept a day past its last)."""

    def __init__(
        self,
        item_key: Item,
        map_name: str,
        *,
        live: str | None = None,
        names: dict[str, str] | None = None,
        expires: Item | None = None,
    ) -> None:
        self.key = item_key
        self.map_name = map_name
        self.must_exist = live is not None
        self._live = live
        self.names = names or {}
        self.refresh = ", expires_at = :expires" if expires is not None else ""
        self.values = {":expires": expires} if expires is not None else {}

    def condition(self, held: str) -> str:
        """`held`, the condition on the map, and that the item is live where it must be."""
        return f"{self._live} AND {held}" if self._live else held
