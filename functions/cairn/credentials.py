"""Identifiers, credentials and their hashes.

Tokens are shown once and never stored: the store keeps SHA-256 digests and
compares them in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets as _random

ADDRESS_ID = re.compile(r"addr_[a-z2-7]{26}")


def new_address_id() -> str:
    """An email-safe id (`[a-z0-9_]`) carrying 130 random bits."""
    raw = base64.b32encode(_random.token_bytes(17)).decode().rstrip("=").lower()
    return f"addr_{raw[:26]}"


def is_address_id(value: str) -> bool:
    """Whether `value` could be an id `new_address_id` made (anything else cannot exist)."""
    return ADDRESS_ID.fullmatch(value) is not None


def new_read_token() -> str:
    """A bearer token with 256 random bits."""
    return f"crt_{_random.token_urlsafe(32)}"


def new_inbox_secret() -> str:
    """The write-only capability embedded in an inbox URL (256 random bits)."""
    return _random.token_urlsafe(32)


def derived_read_token(key: bytes, address_id: str) -> str:
    """The read token of an address provisioned under an `Idempotency-Key`: the same on every retry.

    An HMAC of the address id under `key`, shaped as `new_read_token` makes
    them, so a retry answers with the token again although only its digest is
    stored. `key` comes from the client's key and the server secret
    (`ServerSecret.provisioning_key`): the client's key alone, with the public
    address id, cannot compute it. (Addresses provisioned before the server
    secret existed used the client's key itself.)
    """
    return f"crt_{_derived(key, 'read-token', address_id)}"


def derived_inbox_secret(key: bytes, address_id: str) -> str:
    """The inbox secret of an address provisioned under an `Idempotency-Key` (see `derived_read_token`)."""
    return _derived(key, "inbox-secret", address_id)


def _derived(key: bytes, purpose: str, address_id: str) -> str:
    mac = hmac.new(key, f"cairn/{purpose}/{address_id}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def new_suffix() -> str:
    """A short random tag that makes event ids unique beyond their sequence."""
    return _random.token_hex(4)


def digest(value: str | bytes) -> str:
    """Hex SHA-256 of a credential, idempotency key or request body."""
    data = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


def matches(candidate: str, stored_digest: str | None) -> bool:
    """Whether `candidate` hashes to `stored_digest`, in constant time."""
    return stored_digest is not None and hmac.compare_digest(digest(candidate), stored_digest)
