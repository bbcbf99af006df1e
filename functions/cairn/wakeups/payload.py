"""The JSON a target receives: the address, the subscription and the event, as the feed shows it."""

from __future__ import annotations

import json
from typing import Any

from cairn import jsontext
from cairn.addresses.models import Event
from cairn.clock import iso
from cairn.wakeups.models import Delivery

TEST_TYPE = "subscription.test"


def event_delivery(address_id: str, subscription_id: str, event: Event) -> Delivery:
    """A delivery of a committed event; `webhook-id` is the event id, so a receiver can deduplicate."""
    described = {
        "id": event.id,
        "sequence": event.sequence,
        "type": event.type,
        "source": event.source,
        "ingress_surface": event.ingress_surface,
        "created_at": iso(event.created_at),
    }
    data, as_text = jsontext.stored(event.data_json)
    if as_text:  # nested deeper than any answer carries: its JSON text, marked as the feed marks it
        described["data_encoding"] = "json_text"
    return _delivery(address_id, subscription_id, event.id, event.type, event.sequence, described, data)


def probe_delivery(address_id: str, subscription_id: str, message_id: str, now: float) -> Delivery:
    """What `POST .../test` sends: shaped as an event, with no sequence."""
    described = {"id": message_id, "sequence": None, "type": TEST_TYPE, "source": "cairn", "created_at": iso(now)}
    return _delivery(address_id, subscription_id, message_id, TEST_TYPE, None, described, {"test": True})


def _delivery(
    address_id: str,
    subscription_id: str,
    message_id: str,
    event_type: str,
    sequence: int | None,
    described: dict[str, Any],
    data: Any,
) -> Delivery:
    envelope = {
        "type": event_type,
        "address_id": address_id,
        "subscription_id": subscription_id,
        "sequence": sequence,
    }
    body = _dump({**envelope, "event": {**described, "data": data}})
    # For targets with small messages: the receiver reads the data from the feed by sequence.
    compact = _dump({**envelope, "event": {**described, "data_omitted": True}})
    return Delivery(message_id, event_type, sequence, body, compact)


# SQS takes no message holding U+FFFE or U+FFFF (its characters stop at U+FFFD below U+10000), and a
# stranger's inbox post may: escaped, every target reads the same JSON, and the queue takes it.
_NONCHARACTERS = str.maketrans({"\ufffe": "\\ufffe", "\uffff": "\\uffff"})


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).translate(_NONCHARACTERS)
