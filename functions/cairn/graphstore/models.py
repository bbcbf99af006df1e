"""What the store use case reads and writes, in its own terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Namespace = tuple[str, ...]


@dataclass(frozen=True)
class StoredItem:
    """An item as stored: `version` counts its puts, from 1; times are epoch seconds.

    `ttl_minutes` is set when the item was put with a TTL: `expires_at` is
    then when it stops being readable, and a refreshing read moves it on.
    """

    namespace: Namespace
    key: str
    value: dict[str, Any]
    version: int
    created_at: float
    updated_at: float
    ttl_minutes: float | None = None
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.ttl_minutes is not None and self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True)
class GetOp:
    namespace: Namespace
    key: str
    refresh_ttl: bool = True


@dataclass(frozen=True)
class SearchOp:
    """Items under `namespace_prefix` whose value matches `filter`, in storage order, `offset` skipped, `limit` kept."""

    namespace_prefix: Namespace
    filter: dict[str, Any] = field(default_factory=dict)
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True


@dataclass(frozen=True)
class PutOp:
    """A put (`value`) or a delete (None).

    `expected_version`: commit only while the item is at that version (0:
    while there is none), else `StoreVersionConflict`. None: the last
    writer wins, as LangGraph expects of a plain put.
    """

    namespace: Namespace
    key: str
    value: dict[str, Any] | None
    ttl_minutes: float | None = None
    expected_version: int | None = None


@dataclass(frozen=True)
class ListNamespacesOp:
    """Namespaces with items, matching `prefix` and `suffix` (`*` matches any label), cut to `max_depth`."""

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


Op = GetOp | SearchOp | PutOp | ListNamespacesOp
# What each op answers: the item or None, the items found, the version a put left (0: deleted), the namespaces.
Result = StoredItem | None | list[StoredItem] | int | list[Namespace]


def expiry(ttl_minutes: float | None, address_expires_at: float | None, *, now: float) -> float | None:
    """When an item put or refreshed at `now` stops being readable: its TTL on, never after its address."""
    if ttl_minutes is None:
        return address_expires_at
    deadline = now + ttl_minutes * 60
    return deadline if address_expires_at is None else min(deadline, address_expires_at)
