"""Items of LangGraph's store: one per namespace and key, its value inline or in pieces (attribute names live here)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from cairn import jsontext
from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys, storage_usage
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.graphstore.models import Namespace, PutOp, StoredItem, expiry

Item = dict[str, Any]

NAMESPACE = "namespace"
VERSION = "version"
EXPIRES_AT = "expires_at"
# When an item put with a TTL stops being readable. Not DynamoDB's TTL attribute (`EXPIRES_AT`, which
# such an item takes from its address): the item counts against its address's storage limit until
# Cairn removes it (`GraphStoreTable` does, when a put needs its room), releasing what it counted.
ENDS_AT = "ends_at"
KEY = "item_key"
TTL = "ttl_minutes"
# The SHA-256 of a value kept in pieces: a reader that met a put between the item and its pieces reads again.
_VALUE_DIGEST = "value_sha256"
# A deleted item's marker: it keeps the key's version, so the next item made under the key goes on from it.
DELETED = "deleted"
# How long a deleted item's version is kept (within its address's life): longer than a writer holds a read.
TOMBSTONE_SECONDS = 86_400


def expires_at(owner: Owner) -> Item:
    """DynamoDB's TTL attribute of a store item or piece: its address's end, in whole seconds, rounded up."""
    return {} if owner.expires_at is None else {EXPIRES_AT: n(math.ceil(owner.expires_at))}


def ends_at(ttl_minutes: float, owner: Owner, *, now: float) -> Item:
    """When an item put or refreshed at `now` with a TTL ends, in whole seconds, rounded up so it never ends early."""
    when = expiry(ttl_minutes, owner.expires_at, now=now)
    assert when is not None  # a TTL always gives an end
    return {ENDS_AT: n(math.ceil(when))}


def ends(item: Item) -> float | None:
    """When an item put with a TTL stops being readable (one put before `ENDS_AT` kept it in `EXPIRES_AT`)."""
    return get_n(item, ENDS_AT) if ENDS_AT in item else get_n(item, EXPIRES_AT)


def has_ended(item: Item, now: float) -> bool:
    """Whether the item was put with a TTL that has passed."""
    ended = ends(item)
    return TTL in item and ended is not None and ended <= now


def item_put(
    owner: Owner, op: PutOp, value: dict[str, Any], *, version: int, created_at: float, now: float
) -> list[Item]:
    """The item, then its value's pieces when it is larger than one item holds."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.store_item_sk(op.namespace, op.key)
    data = jsontext.canonical(value).encode()
    # Item and pieces live as long as the address: a TTL moves `ENDS_AT` alone.
    payload, pieces = blobs.split(pk, sk, data, text=True, **expires_at(owner))
    item: Item = {
        **key(pk, sk),
        NAMESPACE: s(jsontext.canonical(list(op.namespace))),
        KEY: s(op.key),
        VERSION: n(version),
        "created_at": n(round(created_at, 3)),
        "updated_at": n(round(now, 3)),
        **payload,
        **expires_at(owner),
    }
    if pieces:
        item[_VALUE_DIGEST] = s(hashlib.sha256(data).hexdigest())
    if op.ttl_minutes is not None:
        item.update({TTL: n(op.ttl_minutes), **ends_at(op.ttl_minutes, owner, now=now)})
    return [storage_usage.with_count(item, pieces), *pieces]


def piece_count(item: Item) -> int:
    return get_int(item, blobs.PIECES)


def namespace_of(item: Item) -> Namespace:
    return tuple(jsontext.parse(get_s(item, NAMESPACE) or "[]"))


def key_of(item: Item) -> str:
    return get_s(item, KEY) or ""


def stored_from(item: Item, data: bytes) -> StoredItem | None:
    """The item with its value joined from `data`; None when the pieces read are not the item's (a put between)."""
    digest = get_s(item, _VALUE_DIGEST)
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        return None
    return StoredItem(
        namespace=namespace_of(item),
        key=key_of(item),
        value=jsontext.parse(data),
        version=get_int(item, VERSION),
        created_at=get_n(item, "created_at") or 0.0,
        updated_at=get_n(item, "updated_at") or 0.0,
        ttl_minutes=get_n(item, TTL),
        expires_at=ends(item) if TTL in item else get_n(item, EXPIRES_AT),
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
        KEY: s(item_key),
        VERSION: n(version),
        DELETED: {"BOOL": True},
        EXPIRES_AT: n(math.ceil(ends)),
    }


def live_version(item: Item | None, now: float) -> int:
    """The version a writer sees: 0 for no item, a deleted one, or one whose TTL has passed."""
    if item is None or is_deleted(item) or has_ended(item, now):
        return 0
    return get_int(item, VERSION)
