"""What an address's count of stored bytes says, read as the table holds it."""

from __future__ import annotations

from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import get_int, key
from cairn.settings import Settings


def counted(settings: Settings, address_id: str) -> int:
    """The address's count of stored bytes (files and sessions); 0 before any was stored."""
    found = make_client(settings).get_item(
        TableName=settings.table_name, Key=key(keys.address_pk(address_id), keys.STORAGE_USAGE), ConsistentRead=True
    )
    return get_int(found.get("Item") or {}, "stored_bytes")
