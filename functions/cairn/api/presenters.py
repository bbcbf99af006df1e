"""Domain objects as the JSON the API returns."""

from __future__ import annotations

from typing import Any

from cairn.addresses.models import AddressRecord, Event
from cairn.addresses.provisioning import Provisioned
from cairn.addresses.state import StateWrite
from cairn.addresses.state_model import StateEntry, StateUsage
from cairn.api import urls
from cairn.clock import iso
from cairn.settings import Settings


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


def provisioned_json(created: Provisioned, base: str) -> dict[str, Any]:
    """The answer to provisioning: the one time the read token and the inbox URL are shown."""
    return {
        "address": address_json(created.record),
        "credentials": {"read_token": created.read_token},
        "endpoints": urls.endpoints(base, created.record.id, created.inbox_secret),
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


def ack_json(event: Event) -> dict[str, Any]:
    return {"event": {"id": event.id, "sequence": event.sequence, "acknowledged_at": iso(event.acknowledged_at or 0.0)}}


def state_value_json(entry: StateEntry | StateWrite) -> dict[str, Any]:
    """A key as read, or as a write left it."""
    return {"key": entry.key, "value": entry.value, "revision": entry.revision, "updated_at": iso(entry.updated_at)}


def state_deletion_json(write: StateWrite) -> dict[str, Any]:
    return {"key": write.key, "deleted": True, "revision": write.revision}


def state_listing_json(entries: list[StateEntry], usage: StateUsage, settings: Settings) -> dict[str, Any]:
    keys = [{"key": e.key, "revision": e.revision, "size": e.size, "updated_at": iso(e.updated_at)} for e in entries]
    return {"keys": keys, "usage": state_usage_json(usage, settings)}


def state_usage_json(usage: StateUsage, settings: Settings) -> dict[str, int]:
    return {
        "keys": usage.keys,
        "bytes": usage.bytes,
        "max_keys": settings.state_max_keys,
        "max_bytes": settings.state_max_bytes,
    }
