"""Webhook deliveries: an HTTP POST signed as Standard Webhooks, to a checked address."""

from __future__ import annotations

from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

from cairn.errors import TargetRefused
from cairn.wakeups import egress
from cairn.wakeups.models import Delivery, Outcome, Subscription

# Enough of an answer to know it was one; the rest is not read.
_MAX_ANSWER_BYTES = 4096
USER_AGENT = "Cairn-Webhooks/1"


def signature(secrets: list[str], message_id: str, timestamp: int, body: str) -> str:
    """`webhook-signature`: one `v1,<base64 HMAC-SHA256>` per valid secret, space-separated.

    During a rotation both the new and the old secret sign, so a receiver
    holding either accepts the delivery (Standard Webhooks allows several).
    """
    moment = datetime.fromtimestamp(timestamp, UTC)
    return " ".join(Webhook(secret).sign(message_id, moment, body) for secret in secrets)


class WebhookTransport:
    def __init__(self, *, timeout: float, allow_local: bool) -> None:
        self._timeout = timeout
        self._allow_local = allow_local

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        """POST the delivery; 2xx is delivered, 410 ends the subscription, anything else is retried."""
        timestamp = int(now)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "webhook-id": delivery.message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(
                subscription.signing_secrets(now), delivery.message_id, timestamp, delivery.body
            ),
        }
        try:
            parts = egress.check_url(subscription.target.params["url"], allow_local=self._allow_local)
            connection = egress.open_connection(parts, timeout=self._timeout, allow_local=self._allow_local)
        except (TargetRefused, egress.EgressRefused) as error:
            return Outcome(delivered=False, error=str(error))
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("POST", path, body=delivery.body.encode(), headers=headers)
            answer = connection.getresponse()
            answer.read(_MAX_ANSWER_BYTES)
        except OSError as error:
            return Outcome(delivered=False, error=f"{type(error).__name__}: {error}")
        finally:
            connection.close()
        status = answer.status
        return Outcome(delivered=200 <= status < 300, gone=status == 410, status_code=status)
