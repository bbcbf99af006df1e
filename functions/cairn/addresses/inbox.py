"""Deliver a callback to an address through its inbox URL.

The secret in the URL is the only credential and it can only write. An
`Idempotency-Key` makes a retried delivery return the original event. The
body may be JSON, form fields, text or bytes (`inbox_bodies`); the surface
is always `http`: whatever the body says of itself (a `source` of `email`,
its own `ingress_surface`) is the poster's word.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Mapping

import msgspec

from cairn import credentials
from cairn.addresses import inbox_bodies, verifiers
from cairn.addresses.access import require_well_formed
from cairn.addresses.inbox_settings import InboxSettings, signing_secret
from cairn.addresses.models import HTTP_SURFACE, AppendResult, IdempotencyClaim, NewEvent
from cairn.addresses.ports import (
    AddressStore,
    AppendRequest,
    Credential,
    CredentialKind,
    InboxSettingsMoved,
    Waiter,
)
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge, SignatureInvalid, Unauthorized, Unavailable, WakeupRefused
from cairn.server_secret import ServerSecret
from cairn.settings import Settings

DEFAULT_TYPE = "message.received"
DEFAULT_SOURCE = "http"
# Appends under settings that keep changing give up after this many.
_ATTEMPTS = 4
_KNOWN_CAPACITY = 50_000
# What every Cairn wake-up carries (`cairn.wakeups.webhook`). An inbox refuses it, so a subscription
# whose URL leads into a Cairn inbox, however it gets there, cannot make its own wake-ups events.
WAKEUP_HEADER = "Cairn-Wakeup"


class InboxRequest(msgspec.Struct, frozen=True):
    """One delivery as it reached the inbox URL.

    `content_type` is the whole `Content-Type` header ("" when absent);
    `labels` are the URL's `type` and `source` query parameters; `headers`
    every request header by lower-case name.
    """

    body: bytes
    content_type: str = ""
    labels: inbox_bodies.Labels = inbox_bodies.NO_LABELS
    idempotency_key: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)


class Inbox:
    """Inbox posts: the body read by its kind, kept headers, signatures checked, one append.

    The settings an append was checked against are a condition of the append
    itself (their revision), so a process learns them from the one write
    that finds them changed, not from a read before every post; it keeps the
    last it saw per address, as a hint.
    """

    def __init__(
        self, table: AddressStore, waiter: Waiter, settings: Settings, clock: Clock, server_secret: ServerSecret
    ) -> None:
        self._table = table
        self._server_secret = server_secret
        self._waiter = waiter
        self._settings = settings
        self._clock = clock
        self._known: dict[str, tuple[str, InboxSettings]] = {}
        self._known_lock = threading.Lock()

    def deliver(self, address_id: str, secret: str, request: InboxRequest) -> AppendResult:
        if WAKEUP_HEADER.lower() in request.headers:
            raise WakeupRefused("A Cairn wake-up cannot be delivered into a Cairn inbox; nothing was stored.")
        limit = self._settings.max_inbox_bytes
        if len(request.body) > limit:
            raise PayloadTooLarge(f"The body exceeds {limit} bytes.", max_bytes=limit)
        body = inbox_bodies.read(request.body, request.content_type, request.labels)
        if request.idempotency_key is not None:
            self._check_key(request.idempotency_key)
        claim = None
        if request.idempotency_key is not None:
            claim = IdempotencyClaim(
                key_digest=credentials.digest(request.idempotency_key), request_digest=body.request_digest
            )
        require_well_formed(address_id)
        secret_digest = credentials.digest(secret)
        inbox = self._last_seen(address_id, secret_digest)
        confirmed = False
        for _ in range(_ATTEMPTS):
            now = self._clock()
            try:
                verified_by = verifiers.verified_by(
                    inbox,
                    request.body,
                    request.headers,
                    now=now,
                    secret_of=lambda verifier: signing_secret(verifier, address_id, self._server_secret),
                )
            except SignatureInvalid:
                if confirmed:
                    raise
                # Settings remembered from an earlier post may be stale: refuse only on current ones.
                inbox, confirmed = self._current(address_id, secret_digest, now), True
                continue
            event = NewEvent(
                type=body.type or DEFAULT_TYPE,
                source=body.source or DEFAULT_SOURCE,
                data_json=body.data_json,
                ingress_surface=HTTP_SURFACE,
                content_type=body.content_type,
                headers=inbox.kept(request.headers),
                verified_by=verified_by,
            )
            try:
                result = self._table.append(
                    AppendRequest(
                        address_id=address_id,
                        events=[event],
                        credential=Credential(CredentialKind.INBOX_SECRET, secret_digest),
                        now=now,
                        idempotency=claim,
                        inbox_revision=inbox.revision,
                    )
                )
            except InboxSettingsMoved as moved:  # raised only once the secret was admitted
                inbox, confirmed = moved.settings, True
                self._remember(address_id, secret_digest, inbox)
                continue
            self._remember(address_id, secret_digest, inbox)
            if not result.duplicate:
                self._waiter.notify(address_id)
            return result
        raise Unavailable("The inbox settings are changing; retry shortly.")

    def _last_seen(self, address_id: str, secret_digest: str) -> InboxSettings:
        """The settings last seen for an address; the defaults when none were; the one refusal for a wrong secret.

        Settings are only remembered after the store admitted a secret, so a
        wrong one is refused here before any signature is looked at: a
        stranger learns nothing of an address's verifiers.
        """
        known = self._known.get(address_id)
        if known is None:
            return InboxSettings()
        if not hmac.compare_digest(known[0], secret_digest):
            raise Unauthorized()
        return known[1]

    def _current(self, address_id: str, secret_digest: str, now: float) -> InboxSettings:
        """The stored settings, read when a remembered verifier refused a post; the one refusal for a wrong secret."""
        record = self._table.load(address_id)
        admitted = record is not None and hmac.compare_digest(record.inbox_secret_digest, secret_digest)
        if record is None or not admitted or not record.is_live(now):
            raise Unauthorized()
        self._remember(address_id, secret_digest, record.inbox)
        return record.inbox

    def _remember(self, address_id: str, secret_digest: str, inbox: InboxSettings) -> None:
        with self._known_lock:
            if len(self._known) >= _KNOWN_CAPACITY:
                self._known.clear()
            self._known[address_id] = (secret_digest, inbox)

    def _check_key(self, idempotency_key: str) -> None:
        limit = self._settings.max_idempotency_key_length
        if not idempotency_key or len(idempotency_key) > limit or not idempotency_key.isprintable():
            raise InvalidRequest(f"Idempotency-Key must be 1 to {limit} printable characters.", field="Idempotency-Key")
