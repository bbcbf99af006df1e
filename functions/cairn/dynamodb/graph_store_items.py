"""Items of LangGraph's store: one per namespace and key, its value inline or in pieces (attribute names live here)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from cairn import jsontext
from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.graphstore.models import Namespace, PutOp, StoredItem, expiry

Item = dict[str, Any]

NAMESPACE = "namespace"
VERSION = "version"
EXPIRES_AT = "expires_at"
_KEY = "item_key"
TTL = "ttl_minutes"
# The SHA-256 of a value kept in pieces: a reader that met a put between the item and its pieces reads again.
_VALUE_DIGEST = "value_sha256"
# A deleted item's marker: it keeps the key's version, so the next item made under the key goes on from it.
DELETED = "deleted"
# How long a deleted item's version is kept (within its address's life): longer than a writer holds a read.
TOMBSTONE_SECONDS = 86_400


def expires_at(ttl_minutes: float | None, owner: Owner, *, now: float) -> Item:
    """The TTL attribute, in whole seconds (DynamoDB's), rounded up so an item never goes early."""
    when = expiry(ttl_minutes, owner.expires_at, now=now)
    return {} if when is None else {EXPIRES_AT: n(math.ceil(when))}


def item_put(
    owner: Owner, op: PutOp, value: dict[str, Any], *, version: int, created_at: float, now: float
) -> list[Item]:
    """The item, then its value's pieces when it is larger than one item holds."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.store_item_sk(op.namespace, op.key)
    data = jsontext.canonical(value).encode()
    lifetime = expires_at(op.ttl_minutes, owner, now=now)
    # Pieces live as long as the address: a refreshed TTL then moves the item alone, and pieces an expired
    # item left behind are removed by the next put of its key, which finds no item there.
    payload, pieces = blobs.split(pk, sk, data, text=True, **expires_at(None, owner, now=now))
    item: Item = {
        **key(pk, sk),
        NAMESPACE: s(jsontext.canonical(list(op.namespace))),
        _KEY: s(op.key),
        VERSION: n(version),
        "created_at": n(round(created_at, 3)),
        "updated_at": n(round(now, 3)),
        **payload,
        **lifetime,
    }
    if pieces:
        item[_VALUE_DIGEST] = s(hashlib.sha256(data).hexdigest())
    if op.ttl_minutes is not None:
        item[TTL] = n(op.ttl_minutes)
    return [item, *pieces]


def piece_count(item: Item) -> int:
    return get_int(item, blobs.PIECES)


def namespace_of(item: Item) -> Namespace:
    return tuple(jsontext.parse(get_s(item, NAMESPACE) or "[]"))


def stored_from(item: Item, data: bytes) -> StoredItem | None:
    """The item with its value joined from `data`; None when the pieces read are not the item's (a put between)."""
    digest = get_s(item, _VALUE_DIGEST)
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        return None
    return StoredItem(
        namespace=namespace_of(item),
        key=get_s(item, _KEY) or "",
        value=jsontext.parse(data),
        version=get_int(item, VERSION),
        created_at=get_n(item, "created_at") or 0.0,
        updated_at=get_n(item, "updated_at") or 0.0,
        ttl_minutes=get_n(item, TTL),
        expires_at=get_n(item, EXPIRES_AT),
    )


def is_deleted(item: Item) -> bool:
    return DELETED in item


def stored_version(item: Item | None) -> int:
    """The last version given under the key, live or not: the next write's is one more, never one reused."""
    return 0 if item is None else get_int(item, VERSION)


def tombstone(owner: Owner, namespace: Namespace, item_key: str, *, version: int, now: float) -> Item:
    """What a delete leaves: no value, the key's version, and a lifetime of its own."""
    ends = now + TOMBSTONE_SECONDS if owner.expires_at is None else min(now + TOMBSTONE_SECONDS, owner.expires_at)
    return {
        **key(keys.address_pk(owner.address_id), keys.store_item_sk(namespace, item_key)),
        NAMESPACE: s(jsontext.canonical(list(namespace))),
        _KEY: s(item_key),
        VERSION: n(version),
        DELETED: {"BOOL": True},
        EXPIRES_AT: n(math.ceil(ends)),
    }


def live_version(item: Item | None, now: float) -> int:
    """The version a writer sees: 0 for no item, a deleted one, or one whose TTL has passed."""
    if item is None or is_deleted(item):
        return 0
    ended = get_n(item, EXPIRES_AT)
    if TTL in item and ended is not None and ended <= now:
        return 0
    return get_int(item, VERSION)
