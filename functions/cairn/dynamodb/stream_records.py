"""Read the table's stream records: which are new address events.

Lambda's event source mapping and the Streams API (`GetRecords`) give the
same record shape: `eventName`, and `dynamodb` with `Keys`, `NewImage` and
`SequenceNumber` in DynamoDB's attribute-value format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cairn.dynamodb import keys
from cairn.dynamodb.address_items import UNSUBSCRIBED
from cairn.dynamodb.items import get_s
from cairn.wakeups.models import EventNotice


def event_notices(records: Iterable[Mapping[str, Any]]) -> list[EventNotice]:
    """The inserted address events among `records`, in stream order (pieces, heads, updates skipped)."""
    notices = []
    for record in records:
        if record.get("eventName") != "INSERT":
            continue
        change = record.get("dynamodb") or {}
        image = change.get("NewImage") or change.get("Keys") or {}
        found = keys.address_of_event_key(get_s(image, "pk") or "", get_s(image, "sk") or "")
        if found is None:
            continue
        address_id, sequence = found
        type_ = get_s(image, "type") or ""
        record_id = str(change.get("SequenceNumber", ""))
        unsubscribed = (image.get(UNSUBSCRIBED) or {}).get("BOOL") is True
        notices.append(EventNotice(address_id, sequence, type_, record_id, unsubscribed=unsubscribed))
    return notices
