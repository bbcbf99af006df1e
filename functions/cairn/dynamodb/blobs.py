"""Payloads larger than one DynamoDB item (400 KB) travel as chunk items
written in the same transaction as the item that references them."""

from __future__ import annotations

INLINE_BYTES = 350_000


def pieces(data: bytes) -> list[bytes]:
    """`data` cut into item-sized pieces; one piece when it fits inline."""
    if len(data) <= INLINE_BYTES:
        return [data]
    return [data[start : start + INLINE_BYTES] for start in range(0, len(data), INLINE_BYTES)]
