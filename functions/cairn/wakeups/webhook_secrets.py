"""Webhook signing secrets, stored sealed by the server secret.

A copy of the table (a backup, an export, a reader of the table alone) would
otherwise hold every webhook's secret, and with it the power to sign
deliveries its receiver trusts: events of the attacker's making, which start
an agent's run. The secret is shown to its owner once, sealed (AES-256-GCM,
`ServerSecret.seal`) before it is stored, bound to its address and
subscription, and opened only to sign a delivery.

A secret stored before sealing existed (`whsec_...` as given) still signs; a
deployment given no server secret (a library use of the services without
one) stores them as given, as it did before.
"""

from __future__ import annotations

from cairn.server_secret import SEALED_PREFIX, ServerSecret
from cairn.wakeups.models import Subscription


def seal(server_secret: ServerSecret, address_id: str, subscription_id: str, secret: str) -> str:
    """What is stored for `secret`: sealed, unless the deployment has no server secret."""
    if not server_secret.configured:
        return secret
    return server_secret.seal(secret, context=_context(address_id, subscription_id))


def opened(server_secret: ServerSecret, subscription: Subscription, stored: str) -> str:
    """The secret `stored` holds, to sign with; `ValueError` if it was sealed under another server secret."""
    if not stored.startswith(SEALED_PREFIX):
        return stored
    return server_secret.unseal(stored, context=_context(subscription.address_id, subscription.id))


def _context(address_id: str, subscription_id: str) -> str:
    # Bound to its place: a sealed secret copied to another subscription does not open there.
    return f"webhook-secret/{address_id}/{subscription_id}"
