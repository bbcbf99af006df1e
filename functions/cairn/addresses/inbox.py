"""Deliver a callback to an address through its inbox URL.

The secret in the URL is the only credential and it can only write. An
`Idempotency-Key` makes a retried delivery return the original event. The
body may be JSON, form fields, text or bytes (`inbox_bodies`); the surface
is always `http`: whatever the body says of itself (a `source` of `email`,
its own `ingress_surface`) is the poster's word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cairn import credentials
from cairn.addresses import inbox_bodies
from cairn.addresses.access import require_well_formed
from cairn.addresses.models import HTTP_SURFACE, AppendResult, IdempotencyClaim, NewEvent
from cairn.addresses.ports import AddressStore, AppendRequest, Credential, CredentialKind, Waiter
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge
from cairn.settings import Settings

DEFAULT_TYPE = "message.received"
DEFAULT_SOURCE = "http"


@dataclass(frozen=True)
class InboxRequest:
    """One delivery as it reached the inbox URL.

    `content_type` is the whole `Content-Type` header ("" when absent);
    `labels` are the URL's `type` and `source` query parameters; `headers`
    every request header by lower-case name.
    """

    body: bytes
    content_type: str = ""
    labels: inbox_bodies.Labels = inbox_bodies.Labels()
    idempotency_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class Inbox:
    def __init__(self, table: AddressStore, waiter: Waiter, settings: Settings, clock: Clock) -> None:
        self._table = table
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def deliver(self, address_id: str, secret: str, request: InboxRequest) -> AppendResult:
        limit = self._settings.max_inbox_bytes
        if len(request.body) > limit:
            raise PayloadTooLarge(f"The body exceeds {limit} bytes.", max_bytes=limit)
        body = inbox_bodies.read(request.body, request.content_type, request.labels)
        if request.idempotency_key is not None:
            self._check_key(request.idempotency_key)
        event = NewEvent(
            type=body.type or DEFAULT_TYPE,
            source=body.source or DEFAULT_SOURCE,
            data_json=body.data_json,
            ingress_surface=HTTP_SURFACE,
            content_type=body.content_type,
        )
        claim = None
        if request.idempotency_key is not None:
            claim = IdempotencyClaim(
                key_digest=credentials.digest(request.idempotency_key), request_digest=body.request_digest
            )
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
