"""Memory events as items, and back.

An event is encoded once (exact JSON data, labels) however often its
append is tried; its data larger than one item is split by `blobs`. The
only place that knows these attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn import jsontext
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.items import from_ms, get_int, get_s, key, n, s, to_ms
from cairn.transcript import exactjson
from cairn.transcript.memory import MemoryEvent, to_millisecond

# What DynamoDB counts for one item beyond its data; a safe estimate.
ITEM_OVERHEAD_BYTES = 200
# An event's labels and type share its item with up to `blobs.INLINE_BYTES` of data, within
# DynamoDB's 400 KB.
MAX_BESIDE_DATA_BYTES = 40_000
# An event's sequence, timestamp and field names in an answer.
_EVENT_FRAME_BYTES = 128


@dataclass(frozen=True)
class EncodedEvent:
    """An event as stored, encoded once however often its append is tried."""

    event: MemoryEvent
    labels: str
    data: bytes

    @classmethod
    def of(cls, event: MemoryEvent) -> EncodedEvent:
        data = exactjson.dumps(event.data, sort_keys=False).encode("utf-8")
        return cls(event=event, labels=exactjson.dumps(event.labels), data=data)

    def items(self, pk: str, sequence: int) -> list[dict[str, Any]]:
        sk = keys.event_sk(sequence)
        payload, chunks = blobs.split(pk, sk, self.data, text=True)
        item = {
            **key(pk, sk),
            "seq": n(sequence),
            "type": s(self.event.type),
            "ts": n(to_ms(to_millisecond(self.event.stored_at))),
            "labels": s(self.labels),
            **payload,
        }
        return [item, *chunks]

    @property
    def item_count(self) -> int:
        pieces = len(blobs.pieces(self.data))
        return 1 if pieces == 1 else 1 + pieces

    @property
    def size(self) -> int:
        stored = len(self.data) + len(self.labels.encode("utf-8")) + len(self.event.type)
        return stored + self.item_count * ITEM_OVERHEAD_BYTES


def sent_beside_data(item: dict[str, Any]) -> int:
    """What a stored event's labels and type take in an answer, escaped as Lambda carries them."""
    labels = get_s(item, "labels") or "{}"
    return jsontext.sent_size(labels) + jsontext.value_sent_size(get_s(item, "type") or "") + _EVENT_FRAME_BYTES


def event_from_item(item: dict[str, Any], data: bytes) -> MemoryEvent:
    return MemoryEvent(
        type=get_s(item, "type") or "",
        timestamp=from_ms(get_int(item, "ts")),
        data=exactjson.loads(data),
        labels=exactjson.loads(get_s(item, "labels") or "{}"),
        sequence=get_int(item, "seq"),
    )
