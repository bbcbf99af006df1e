"""Payloads larger than one DynamoDB item (400 KB), written and read one way.

A payload that fits stays inline in its item's `data`; a larger one is cut
into pieces written, in the same transaction, as items at
`keys.payload_chunk_sk(<item sk>, n)`, and the item keeps their count in
`pieces`, by which they are read back (from the first key to the last). Every
table writes this layout.

Items written before it keep their pieces elsewhere, counted in `chunks` or
`data_chunks`: `read` finds those under the caller's legacy prefix, so
stored data stays readable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.items import b, key, n, s

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

INLINE_BYTES = 350_000
PIECES = "pieces"
_LEGACY_COUNTS = ("chunks", "data_chunks")

Item = dict[str, Any]


def pieces(data: bytes) -> list[bytes]:
    """`data` cut into item-sized pieces; one piece when it fits inline."""
    if len(data) <= INLINE_BYTES:
        return [data]
    return [data[start : start + INLINE_BYTES] for start in range(0, len(data), INLINE_BYTES)]


def split(pk: str, sk: str, data: bytes, *, text: bool = False, **chunk_attributes: Any) -> tuple[Item, list[Item]]:
    """The payload attributes of item (`pk`, `sk`) and the piece items to write beside it.

    `text` keeps an inline payload as a string (UTF-8 `data`), else as
    binary; pieces are always binary and carry `chunk_attributes` (such as
    `expires_at`) so they share their item's fate.
    """
    parts = pieces(data)
    if len(parts) == 1:
        return {"data": s(data.decode("utf-8")) if text else b(data)}, []
    chunks = [
        {**key(pk, keys.payload_chunk_sk(sk, index)), "data": b(part), **chunk_attributes}
        for index, part in enumerate(parts)
    ]
    return {PIECES: n(len(parts))}, chunks


def is_split(item: Item) -> bool:
    """Whether the item's payload lives in piece items (in any layout)."""
    return "data" not in item and any(name in item for name in (PIECES, *_LEGACY_COUNTS))


def read(client: DynamoDBClient, table: str, item: Item, *, legacy_prefix: str) -> bytes | None:
    """The payload of `item`, inline or joined from its pieces; None when it has none.

    `legacy_prefix` is where this kind of item kept its pieces before the
    common layout.
    """
    inline = item.get("data")
    if inline is not None:
        return inline["S"].encode("utf-8") if "S" in inline else bytes(inline["B"])
    pk, sk = item["pk"]["S"], item["sk"]["S"]
    if PIECES in item:
        # Its pieces by their first and last keys, not by their prefix: an item's key may begin another's (a
        # Strands agent's head, its messages), and the prefix would take the other's pieces too.
        last = int(item[PIECES]["N"]) - 1
        parts = table_ops.query_range(client, table, pk, keys.payload_chunk_sk(sk, 0), keys.payload_chunk_sk(sk, last))
    elif is_split(item):
        parts = table_ops.query_prefix(client, table, pk, legacy_prefix)
    else:
        return None
    return b"".join(bytes(part["data"]["B"]) for part in parts)
