"""What an address's count of stored bytes says, read as the table holds it."""

from __future__ import annotations

from cairn.dynamodb import keys, storage_usage
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import get_int, key
from cairn.settings import Settings


def counted(settings: Settings, address_id: str) -> int:
    """The address's count of stored bytes (files, sessions and checkpoints); 0 before any was stored."""
    found = make_client(settings).get_item(
        TableName=settings.table_name, Key=key(keys.address_pk(address_id), keys.STORAGE_USAGE), ConsistentRead=True
    )
    return get_int(found.get("Item") or {}, "stored_bytes")


def counted_items(settings: Settings, address_id: str) -> int:
    """What the address's items that keep their own count (checkpoints, writes, parts) say they count."""
    client = make_client(settings)
    pages = client.get_paginator("query").paginate(
        TableName=settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.address_pk(address_id)}},
        ConsistentRead=True,
    )
    return sum(get_int(item, storage_usage.COUNTED) for page in pages for item in page.get("Items", []))
