"""Webhook deliveries: an HTTP POST signed as Standard Webhooks, to a checked address, within one deadline."""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cached_property
from urllib.parse import SplitResult

import anyio
import httpcore
from standardwebhooks.webhooks import Webhook

from cairn.addresses.inbox import WAKEUP_HEADER
from cairn.errors import TargetRefused
from cairn.server_secret import ServerSecret
from cairn.wakeups import egress, webhook_secrets
from cairn.wakeups.models import Delivery, Outcome, Subscription

USER_AGENT = "Cairn-Webhooks/1"
# Why nothing is sent when no secret of the subscription can be opened (the server secret changed).
UNREADABLE_SECRET = (
    "the subscription's signing secret was sealed under another server secret: rotate it "
    "(POST .../subscriptions/{id}/rotate) to sign its deliveries again"
)
# What no answer from a target can be anything but: a connection, TLS, a refused address, a broken answer.
_FAILURES = (OSError, egress.EgressRefused, httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol)


def signature(secrets: list[str], message_id: str, timestamp: int, body: str) -> str:
    """`webhook-signature`: one `v1,<base64 HMAC-SHA256>` per valid secret, space-separated.

    During a rotation both the new and the old secret sign, so a receiver
    holding either accepts the delivery (Standard Webhooks allows several).
    """
    moment = datetime.fromtimestamp(timestamp, UTC)
    return " ".join(Webhook(secret).sign(message_id, moment, body) for secret in secrets)


class WebhookTransport:
    """POSTs deliveries; `timeout` is each delivery's deadline, from name lookup to the answer's status.

    The deadline is enforced around the whole exchange by cancelling it, not
    per socket read, so a receiver that trickles its answer a byte at a time
    is cut at the deadline like one that never answers.
    `own_origins` are this deployment's fixed URLs, refused at delivery too.
    """

    def __init__(
        self,
        *,
        timeout: float,
        allow_local: bool,
        own_origins: Iterable[str] = (),
        server_secret: ServerSecret | None = None,
    ) -> None:
        self._timeout = timeout
        self._allow_local = allow_local
        self._own_origins = tuple(own_origins)
        self._server_secret = server_secret

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        """POST the delivery; 2xx is delivered, 410 ends the subscription, anything else is retried."""
        url = subscription.target.params["url"]
        try:
            parts = egress.check_url(url, allow_local=self._allow_local, own_origins=self._own_origins)
        except TargetRefused as error:
            return Outcome(delivered=False, error=str(error))
        keys = self._signing_keys(subscription, now)
        if not keys:
            return Outcome(delivered=False, error=UNREADABLE_SECRET)
        timestamp = int(now)
        body = delivery.body.encode()
        headers = {
            "Host": parts.netloc,
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "User-Agent": USER_AGENT,
            # Tells a Cairn inbox this is a wake-up, which it refuses: no subscription can feed an inbox.
            WAKEUP_HEADER: subscription.id,
            "webhook-id": delivery.message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(keys, delivery.message_id, timestamp, delivery.body),
        }
        try:
            status = anyio.run(self._post, parts, headers, body)
        except TimeoutError:
            return Outcome(delivered=False, error=f"no answer within the delivery deadline of {self._timeout:g} s")
        except _FAILURES as error:
            return Outcome(delivered=False, error=f"{type(error).__name__}: {error}")
        return Outcome(delivered=200 <= status < 300, gone=status == 410, status_code=status)

    def _signing_keys(self, subscription: Subscription, now: float) -> list[str]:
        """The subscription's signing secrets in force, opened; one sealed under another server secret is left out."""
        if self._server_secret is None:
            return subscription.signing_secrets(now)
        keys = []
        for stored in subscription.signing_secrets(now):
            try:
                keys.append(webhook_secrets.opened(self._server_secret, subscription, stored))
            except ValueError:
                continue
        return keys

    @cached_property
    def _tls(self) -> ssl.SSLContext:
        """The TLS context of https deliveries, made for the first: loading the trusted certificates takes about
        50 ms, which a process that delivers none (or only over http) need not spend."""
        return ssl.create_default_context()

    async def _post(self, parts: SplitResult, headers: dict[str, str], body: bytes) -> int:
        """The answer's status; its body is not read (the connection closes)."""
        url = httpcore.URL(
            scheme=parts.scheme,
            host=parts.hostname or "",
            port=parts.port,
            target=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
        )
        with anyio.fail_after(self._timeout):
            async with httpcore.AsyncConnectionPool(
                ssl_context=self._tls if parts.scheme == "https" else None,
                network_backend=egress.PinnedBackend(allow_local=self._allow_local),
            ) as pool:
                async with pool.stream("POST", url, headers=list(headers.items()), content=body) as answer:
                    return answer.status
