"""For webhook receivers: check that a delivery came from Cairn.

    from cairn.client import webhooks
    payload = webhooks.verify(request.headers, request.body, secret)   # raises InvalidSignature

Deliveries are signed as Standard Webhooks; any of their libraries works
too. Deduplicate by `payload["event"]["id"]` (also the `webhook-id`
header): delivery is at least once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class InvalidSignature(Exception):
    """The delivery is not signed by this secret, is missing its headers, or is older than five minutes."""


def verify(headers: Mapping[str, str], body: bytes | str, secret: str) -> Any:
    """The delivery's JSON if its signature and timestamp check out with `secret`; `InvalidSignature` if not."""
    try:
        return Webhook(secret).verify(body, dict(headers))
    except (WebhookVerificationError, ValueError) as error:
        raise InvalidSignature(str(error)) from None
