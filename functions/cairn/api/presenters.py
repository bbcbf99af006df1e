"""Domain objects as the JSON the API returns."""

from __future__ import annotations

from typing import Any

from cairn.addresses.models import AddressRecord, Event
from cairn.clock import iso


def address_json(record: AddressRecord) -> dict[str, Any]:
    expires = None if record.expires_at is None else iso(record.expires_at)
    return {
        "id": record.id,
        "task_id": record.task_id,
        "name": record.name,
        "email": record.email,
        "created_at": iso(record.created_at),
        "expires_at": expires,
        "expiresAt": expires,
    }


def event_json(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "sequence": event.sequence,
        "type": event.type,
        "source": event.source,
        "data": event.data,
        "created_at": iso(event.created_at),
        "acknowledged_at": None if event.acknowledged_at is None else iso(event.acknowledged_at),
    }
