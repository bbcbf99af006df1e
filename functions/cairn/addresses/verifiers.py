"""Check a delivery's provider signature against the inbox's registered verifiers.

Each scheme is the provider's documented one: an HMAC-SHA256 over the raw
body (and, where the provider signs one, a timestamp that must be within the
tolerance of Cairn's clock, so a captured delivery cannot be replayed later),
compared with `hmac.compare_digest`. Standard Webhooks uses its reference
library.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping

from cairn.addresses.inbox_settings import GITHUB, SLACK, STANDARD_WEBHOOKS, STRIPE, InboxSettings, Verifier
from cairn.errors import SignatureInvalid

logger = logging.getLogger(__name__)

Headers = Mapping[str, str]


def verified_by(
    settings: InboxSettings, body: bytes, headers: Headers, *, now: float, secret_of: Callable[[Verifier], str]
) -> str | None:
    """The kind of the first verifier the delivery passes; None when the inbox has none.

    `headers` by lower-case name; `secret_of` gives a verifier's secret as
    its provider signs with it (stored secrets are sealed; `ValueError` when
    one no longer opens). Raises `signature_invalid` (with each verifier's
    reason) when verifiers are set and none passes.
    """
    if not settings.verifiers:
        return None
    reasons: dict[str, str] = {}
    for verifier in settings.verifiers:
        try:
            secret = secret_of(verifier)
        except ValueError:
            # Sealed under a server secret the deployment no longer has: nothing can pass it.
            logger.warning("an inbox verifier's secret does not open", extra={"kind": verifier.kind})
            reasons[verifier.kind] = "its secret no longer opens on this server: the owner must register it again"
            continue
        reason = _CHECKS[verifier.kind](verifier, secret, body, headers, now)
        if reason is None:
            return verifier.kind
        reasons[verifier.kind] = reason
    raise SignatureInvalid(
        f"The delivery passed none of this inbox's verifiers ({', '.join(reasons)}).", reasons=reasons
    )


def _hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _github(verifier: Verifier, secret: str, body: bytes, headers: Headers, now: float) -> str | None:
    """`X-Hub-Signature-256: sha256=<hex HMAC of the body>` (GitHub signs no time)."""
    header = headers.get("x-hub-signature-256")
    if header is None:
        return "no X-Hub-Signature-256 header"
    scheme, _, signature = header.partition("=")
    if scheme != "sha256" or not hmac.compare_digest(signature.encode(), _hmac_hex(secret, body).encode()):
        return "the signature does not match"
    return None


def _stripe(verifier: Verifier, secret: str, body: bytes, headers: Headers, now: float) -> str | None:
    """`Stripe-Signature: t=<unix time>,v1=<hex HMAC of "t.body">[,v1=…]`."""
    header = headers.get("stripe-signature")
    if header is None:
        return "no Stripe-Signature header"
    pairs = [part.strip().partition("=") for part in header.split(",")]
    timestamps = [value for name, _, value in pairs if name == "t"]
    signatures = [value for name, _, value in pairs if name == "v1"]
    if len(timestamps) != 1 or not signatures:
        return "the Stripe-Signature header has no timestamp or no v1 signature"
    late = _outside(timestamps[0], verifier, now)
    if late:
        return late
    expected = _hmac_hex(secret, timestamps[0].encode() + b"." + body).encode()
    # Every candidate is compared, so the time taken does not depend on which one matches.
    matched = [hmac.compare_digest(signature.encode(), expected) for signature in signatures]
    return None if any(matched) else "the signature does not match"


def _slack(verifier: Verifier, secret: str, body: bytes, headers: Headers, now: float) -> str | None:
    """`X-Slack-Signature: v0=<hex HMAC of "v0:<X-Slack-Request-Timestamp>:body">`."""
    signature, timestamp = headers.get("x-slack-signature"), headers.get("x-slack-request-timestamp")
    if signature is None or timestamp is None:
        return "no X-Slack-Signature or X-Slack-Request-Timestamp header"
    late = _outside(timestamp, verifier, now)
    if late:
        return late
    expected = "v0=" + _hmac_hex(secret, b"v0:" + timestamp.encode() + b":" + body)
    return None if hmac.compare_digest(signature.encode(), expected.encode()) else "the signature does not match"


def _standard_webhooks(verifier: Verifier, secret: str, body: bytes, headers: Headers, now: float) -> str | None:
    """`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`: checked by the reference library.

    The library checks the timestamp against the system clock with the
    specification's five minutes; Cairn's own clock is checked first.
    """
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    late = _outside(headers.get("webhook-timestamp", ""), verifier, now)
    if late:
        return late
    try:
        Webhook(secret).verify(body, dict(headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as error:  # malformed headers and bodies raise ValueError
        return f"the signature does not match ({error})"
    return None


def _outside(timestamp: str, verifier: Verifier, now: float) -> str | None:
    """Why a signed timestamp is refused: not a number, or further than the tolerance from now."""
    tolerance = verifier.tolerance_s or 0
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return "the signed timestamp is not a Unix time"
    if abs(now - int(timestamp)) > tolerance:
        return f"the signed timestamp is more than {tolerance} s from now"
    return None


_CHECKS = {GITHUB: _github, STRIPE: _stripe, SLACK: _slack, STANDARD_WEBHOOKS: _standard_webhooks}
