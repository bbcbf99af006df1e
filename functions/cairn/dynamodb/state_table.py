"""State of an address: one item per key plus one usage item, in the single table.

Each key item carries its own revision, so writes to different keys never
conflict. The usage item (`STATE`) holds the address's key and byte totals;
writes move it with `ADD` under a condition computed from the limit
(`bytes <= max - delta`), which keeps the limit exact under concurrency
without a read inside the transaction. Deleted keys stay as tombstones that
remember their last revision, so a recreated key never reuses a number.

Writes are actions of the address's append transaction
(`state_items.change_actions`), so every change commits with its
`state.updated` event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cairn.addresses.state_model import StateEntry, StateSnapshot, StateUsage
from cairn.dynamodb import keys, state_items, table_ops
from cairn.dynamodb.address_items import record_from_item
from cairn.dynamodb.items import key
from cairn.errors import Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


class StateTable:
    """Consistent reads of address state (`cairn.addresses.ports.StateStore`)."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
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
            entries={entry.key: entry for entry in map(state_items.entry_from_item, items.values())},
            usage=state_items.usage_from_item(usage_item),
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
                entry = state_items.entry_from_item(item)
                entries[entry.key] = entry
        return entries, state_items.usage_from_item(usage_item)

    def usage(self, address_id: str) -> StateUsage:
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.STATE),
            ConsistentRead=True,
        )
        return state_items.usage_from_item(response.get("Item"))
