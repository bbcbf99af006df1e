"""What an address and its events are, independent of storage and HTTP."""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from cairn import jsontext
from cairn.addresses.inbox_settings import InboxSettings
from cairn.decimal_text import is_decimal
from cairn.errors import IdempotencyKeyReused


class AddressRecord(msgspec.Struct, frozen=True):
    """The head of an address: identity, credential digests, feed position."""

    id: str
    task_id: str | None
    name: str | None
    email: str
    created_at: float
    expires_at: float | None
    read_token_digest: str
    inbox_secret_digest: str
    last_sequence: int = 0
    # The owner removed every event up to this sequence (0: none trimmed).
    trimmed_through: int = 0
    inbox: InboxSettings = InboxSettings()

    def is_live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


# Where an event entered Cairn, set by the server and never by a client: an
# inbox post (`http`) and a state change (`state`); mail's name is the
# deployment's `email_ingress_surface` setting (`email` by default).
HTTP_SURFACE = "http"
STATE_SURFACE = "state"
# Cairn's own outbound mail: `email.sent` and its outcome.
OUTBOUND_SURFACE = "outbound"


class NewEvent(msgspec.Struct, frozen=True):
    """An event about to be appended; `data_json` is its canonical JSON text.

    `type` and `source` are labels (an inbox poster chooses them);
    `ingress_surface` is the use case's own statement of where it came from.
    An inbox post also records the type its body was read as, the request
    headers its address keeps, and the verifier that checked its signature.
    """

    type: str
    source: str
    data_json: str
    ingress_surface: str
    content_type: str | None = None
    headers: Mapping[str, str] | None = None
    verified_by: str | None = None


class Event(msgspec.Struct, frozen=True):
    """A committed event of an address feed."""

    id: str
    sequence: int
    type: str
    source: str
    data_json: str
    created_at: float
    expires_at: float
    ingress_surface: str
    acknowledged_at: float | None = None
    content_type: str | None = None
    headers: Mapping[str, str] | None = None
    verified_by: str | None = None

    @property
    def data(self) -> Any:
        return json.loads(self.data_json)


class Acknowledged(msgspec.Struct, frozen=True):
    """An acknowledged event: which one, and when it was first acknowledged."""

    id: str
    sequence: int
    acknowledged_at: float


class EventRef(msgspec.Struct, frozen=True):
    """Where an appended (or deduplicated) event landed."""

    id: str
    sequence: int


class ClaimedEvent(msgspec.Struct, frozen=True):
    """The event a live idempotency claim points to, and the digest of the request that claimed it."""

    ref: EventRef
    request_digest: str


class IdempotencyClaim(msgspec.Struct, frozen=True):
    """An `Idempotency-Key` and the digest of the request it first came with."""

    key_digest: str
    request_digest: str

    def check_same_request(self, claimed_request_digest: str) -> None:
        """`IdempotencyKeyReused` unless the key's claim was made by this same request."""
        if not hmac.compare_digest(claimed_request_digest, self.request_digest):
            raise IdempotencyKeyReused("This Idempotency-Key was already used with a different request body.")


class AppendResult(msgspec.Struct, frozen=True):
    events: list[EventRef]
    duplicate: bool = False


class FeedPage(msgspec.Struct, frozen=True):
    events: list[Event]
    has_more: bool
    # Events up to this sequence were trimmed by the owner: a reader behind it skipped them.
    trimmed_through: int = 0


class TrimResult(msgspec.Struct, frozen=True):
    """What one trim removed: live events, and the sequence the feed is now trimmed through."""

    trimmed: int
    trimmed_through: int


class FeedCounts(msgspec.Struct, frozen=True):
    """A feed's depth, counted from one read of its head: `retained` events all lie at or below
    `last_sequence`, so a describe never reports more events than the feed's last sequence."""

    retained: int
    unacknowledged: int
    last_sequence: int = 0


def legacy_surface(type_: str, source: str) -> str:
    """The surface of an event stored before events carried one.

    A state change wrote `state.updated` from source `state`; it is taken as
    one. Everything else reads as `http`, mail included: an inbox post could
    store the same `email.received` type and `email` source, so they prove
    nothing, and such events are unproven until they expire.
    """
    if type_ == "state.updated" and source == STATE_SURFACE:
        return STATE_SURFACE
    return HTTP_SURFACE


def event_id(sequence: int, suffix: str) -> str:
    """Event ids carry their sequence so an ack finds the item in one call."""
    return f"evt_{sequence}_{suffix}"


def sequence_of(event_id_text: str) -> int | None:
    """The sequence inside an event id, or None if it is not one of ours."""
    parts = event_id_text.split("_")
    if len(parts) != 3 or parts[0] != "evt" or not is_decimal(parts[1]) or len(parts[1]) > 12:
        return None
    return int(parts[1])


# An event's id, sequence, times and field names in an answer.
_EVENT_FRAME_BYTES = 256


def sent_size(event: Event) -> int:
    """What one event adds to a feed answer, escaped as Lambda carries it."""
    labels = [event.type, event.source, event.content_type, event.verified_by, event.headers]
    return jsontext.sent_size(event.data_json) + jsontext.value_sent_size(labels) + _EVENT_FRAME_BYTES
