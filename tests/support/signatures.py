"""Provider signatures computed as each provider documents them, for tests of the inbox verifiers.

Written from the providers' documentation, independently of Cairn's own
checks: GitHub (`X-Hub-Signature-256`), Stripe (`Stripe-Signature`), Slack
(`X-Slack-Signature`, `X-Slack-Request-Timestamp`) and Standard Webhooks
(`webhook-id`, `webhook-timestamp`, `webhook-signature`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

STANDARD_WEBHOOKS_SECRET = "whsec_" + base64.b64encode(b"standard webhooks test key 32 b!").decode()


def _hex(secret: str | bytes, message: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def github(secret: str, body: bytes) -> dict[str, str]:
    return {
        "X-Hub-Signature-256": "sha256=" + _hex(secret, body),
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    }


def stripe(secret: str, body: bytes, at: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    return {"Stripe-Signature": f"t={stamp},v1={_hex(secret, stamp.encode() + b'.' + body)},v0=ignored"}


def slack(signing_secret: str, body: bytes, at: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + _hex(signing_secret, b"v0:" + stamp.encode() + b":" + body),
    }


def standard_webhooks(
    secret: str, body: bytes, at: int | None = None, message_id: str = "msg_2Lh9KQ"
) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{message_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }
