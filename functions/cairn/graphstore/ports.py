"""What the store use case needs from storage; `cairn.dynamodb.graph_store_table` implements it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from cairn.checkpoints.models import Owner
from cairn.graphstore.models import Namespace, PutOp, StoredItem


class GraphStoreItems(Protocol):
    def get(self, address_id: str, namespace: Namespace, key: str) -> StoredItem | None:
        """The item as stored, expired or not."""
        ...

    def under(self, address_id: str, prefix: Namespace) -> Iterator[StoredItem]:
        """Every item in `prefix` or below, expired or not, in storage order, read lazily."""
        ...

    def namespaces(self, address_id: str, prefix: Namespace) -> Iterator[tuple[Namespace, float | None]]:
        """The namespace of every item in `prefix` or below with when it expires (None: with its address)."""
        ...

    def put(self, owner: Owner, op: PutOp, *, now: float) -> int:
        """Store or delete the item in one commit, checking the owner's address; the version it is at now.

        An item whose TTL has passed counts as absent. With
        `expected_version`, `StoreVersionConflict` when the item is at
        another; without, the last writer wins.
        """
        ...

    def refresh(self, owner: Owner, item: StoredItem, *, now: float) -> None:
        """Move a TTL item's expiry `ttl_minutes` on from `now`, unless it changed since it was read."""
        ...
