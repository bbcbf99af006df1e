"""Between the store route's wire shapes and the store use case's objects, both ways."""

from __future__ import annotations

from datetime import UTC, datetime

from cairn.api import store_schemas as schemas
from cairn.graphstore.models import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp, StoredItem


def op_in(op: schemas.GetIn | schemas.SearchIn | schemas.PutIn | schemas.ListNamespacesIn) -> Op:
    if isinstance(op, schemas.GetIn):
        return GetOp(tuple(op.namespace), op.key, op.refresh_ttl)
    if isinstance(op, schemas.SearchIn):
        return SearchOp(tuple(op.namespace_prefix), op.filter, op.limit, op.offset, op.refresh_ttl)
    if isinstance(op, schemas.PutIn):
        return PutOp(tuple(op.namespace), op.key, op.value, op.ttl, op.expected_version)
    return ListNamespacesOp(
        prefix=None if op.prefix is None else tuple(op.prefix),
        suffix=None if op.suffix is None else tuple(op.suffix),
        max_depth=op.max_depth,
        limit=op.limit,
        offset=op.offset,
    )


def result_out(
    op: Op, result: Result
) -> schemas.GetOut | schemas.SearchOut | schemas.PutOut | schemas.ListNamespacesOut:
    if isinstance(op, GetOp):
        return schemas.GetOut(item=item_out(result) if isinstance(result, StoredItem) else None)
    if isinstance(op, PutOp):
        return schemas.PutOut(version=result if isinstance(result, int) else 0)
    found = result if isinstance(result, list) else []
    if isinstance(op, SearchOp):
        return schemas.SearchOut(items=[item_out(item) for item in found if isinstance(item, StoredItem)])
    return schemas.ListNamespacesOut(
        namespaces=[list(namespace) for namespace in found if isinstance(namespace, tuple)]
    )


def item_out(item: StoredItem) -> schemas.ItemOut:
    return schemas.ItemOut(
        namespace=list(item.namespace),
        key=item.key,
        value=item.value,
        version=item.version,
        created_at=_iso(item.created_at),
        updated_at=_iso(item.updated_at),
    )


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()
