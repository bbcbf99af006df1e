"""Deliver a callback to an address through its inbox URL.

The secret in the URL is the only credential and it can only write. An
`Idempotency-Key` makes a retried delivery return the original event.
"""

from __future__ import annotations

from typing import Any

from cairn import credentials, jsontext
from cairn.addresses.access import require_well_formed
from cairn.addresses.models import HTTP_SURFACE, AppendResult, IdempotencyClaim, NewEvent
from cairn.addresses.ports import AddressStore, AppendRequest, Credential, CredentialKind, Waiter
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge
from cairn.settings import Settings

DEFAULT_TYPE = "message.received"
DEFAULT_SOURCE = "http"
MAX_LABEL_LENGTH = 256


class Inbox:
    def __init__(self, table: AddressStore, waiter: Waiter, settings: Settings, clock: Clock) -> None:
        self._table = table
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def deliver(self, address_id: str, secret: str, body: bytes, idempotency_key: str | None) -> AppendResult:
        limit = self._settings.max_inbox_bytes
        if len(body) > limit:
            raise PayloadTooLarge(f"The body exceeds {limit} bytes.", max_bytes=limit)
        payload = jsontext.parse(body)
        if idempotency_key is not None:
            self._check_key(idempotency_key)
        event = event_from_body(payload)
        claim = None if idempotency_key is None else _claim(idempotency_key, payload, event)
        require_well_formed(address_id)
        result = self._table.append(
            AppendRequest(
                address_id=address_id,
                events=[event],
                credential=Credential(CredentialKind.INBOX_SECRET, credentials.digest(secret)),
                now=self._clock(),
                idempotency=claim,
            )
        )
        if not result.duplicate:
            self._waiter.notify(address_id)
        return result

    def _check_key(self, idempotency_key: str) -> None:
        limit = self._settings.max_idempotency_key_length
        if not idempotency_key or len(idempotency_key) > limit or not idempotency_key.isprintable():
            raise InvalidRequest(f"Idempotency-Key must be 1 to {limit} printable characters.", field="Idempotency-Key")


def _claim(idempotency_key: str, body: Any, event: NewEvent) -> IdempotencyClaim:
    """The claim of a request: the digest of its whole body as canonical text.

    When the body is the event's data, its canonical text is the event's:
    the body is written out once.
    """
    has_data = isinstance(body, dict) and "data" in body
    body_json = jsontext.canonical(body) if has_data else event.data_json
    return IdempotencyClaim(
        key_digest=credentials.digest(idempotency_key), request_digest=credentials.digest(body_json)
    )


def event_from_body(body: Any) -> NewEvent:
    """AgentAddress mapping: `type`, `source` and `data` if given, else defaults and the whole body.

    The surface is always `http`: whatever the body says of itself (a
    `source` of `email`, its own `ingress_surface`) is the poster's word.
    """
    fields = body if isinstance(body, dict) else {}
    data = fields["data"] if "data" in fields else body
    return NewEvent(
        type=_label(fields, "type", DEFAULT_TYPE),
        source=_label(fields, "source", DEFAULT_SOURCE),
        data_json=jsontext.canonical(data),
        ingress_surface=HTTP_SURFACE,
    )


def _label(fields: dict[str, Any], name: str, default: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value:
        return default
    if len(value) > MAX_LABEL_LENGTH:
        raise InvalidRequest(f"{name} must be at most {MAX_LABEL_LENGTH} characters.", field=name)
    return value
