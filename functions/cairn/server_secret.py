"""The deployment's own secret, and the keys derived from it.

Two things need a secret that no client holds and no copy of the table shows:

- An address provisioned under an `Idempotency-Key` has credentials a retry
  must reproduce, while only their digests are stored. The address id is
  public (it is the email address and part of the inbox URL), so the key alone
  must not determine them: they are HMACs under a key derived from this secret
  and the client's key together (`provisioning_key`).
- An inbox verifier's secret must be usable, since an HMAC is checked with its
  key, so it cannot be kept as a digest: it is stored sealed with AES-256-GCM
  under a key derived from this secret, bound to the address and the verifier
  it belongs to (`seal`, `unseal`). So is a webhook subscription's signing
  secret (`cairn.wakeups.webhook_secrets`).

Each use has its own key, derived with HKDF-SHA256 (RFC 5869). The secret is
configuration (`Settings.server_secret`, or `server_secret_arn` naming the
Secrets Manager secret the stack creates), read on first use and kept for the
life of the process: a Lambda container reads it once, after any SnapStart
restore, so no snapshot holds it. Without it, sealed verifier secrets cannot be
opened and provisioning retries cannot be answered, so it lives as long as the
table does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable

from cairn.settings import Settings

# The shortest secret accepted: 256 bits as base64 text.
MIN_SECRET_LENGTH = 43
# What a sealed value starts with: the scheme it was sealed by (AES-256-GCM, 96-bit random nonce).
SEALED_PREFIX = "v1."
_NONCE_BYTES = 12


class ServerSecretUnavailable(RuntimeError):
    """The deployment has no usable server secret: a configuration error, never a client's."""


class ServerSecret:
    """The keys derived from one deployment secret, loaded by `load` on first use."""

    def __init__(self, load: Callable[[], str], *, configured: bool = True) -> None:
        self._load = load
        self.configured = configured
        self._lock = threading.Lock()
        self._root: bytes | None = None
        self._keys: dict[str, bytes] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerSecret:
        """The secret given in the settings, else the one in the Secrets Manager secret they name."""
        given, arn, region = settings.server_secret, settings.server_secret_arn, settings.region
        if given:
            return cls(lambda: given)
        if arn:
            return cls(lambda: _stored_secret(arn, region))
        return cls(_unconfigured, configured=False)

    def provisioning_key(self, idempotency_key: str) -> bytes:
        """The key an address provisioned under `idempotency_key` derives its credentials with."""
        return hmac.new(self._key("provisioning"), idempotency_key.encode(), hashlib.sha256).digest()

    def seal(self, plaintext: str, *, context: str) -> str:
        """`plaintext` encrypted and authenticated; only `unseal` with the same `context` opens it."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._key("sealing")).encrypt(nonce, plaintext.encode(), context.encode())
        return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def unseal(self, sealed: str, *, context: str) -> str:
        """What `seal` sealed under `context`; `ValueError` for anything else, or another context."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not sealed.startswith(SEALED_PREFIX):
            raise ValueError("not a value sealed by this version of Cairn")
        raw = base64.urlsafe_b64decode(sealed.removeprefix(SEALED_PREFIX))
        try:
            opened = AESGCM(self._key("sealing")).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode())
        except InvalidTag:
            raise ValueError("sealed under another server secret or for another context") from None
        return opened.decode()

    def _key(self, purpose: str) -> bytes:
        with self._lock:
            key = self._keys.get(purpose)
            if key is None:
                from cryptography.hazmat.primitives import hashes
                from cryptography.hazmat.primitives.kdf.hkdf import HKDF

                if self._root is None:
                    self._root = _checked(self._load()).encode()
                derive = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"cairn/{purpose}".encode())
                key = self._keys[purpose] = derive.derive(self._root)
            return key


def _checked(secret: str) -> str:
    if len(secret) < MIN_SECRET_LENGTH:
        raise ServerSecretUnavailable(f"the server secret must be at least {MIN_SECRET_LENGTH} characters")
    return secret


def _stored_secret(arn: str, region: str) -> str:
    from cairn import aws

    return str(aws.client("secretsmanager", region).get_secret_value(SecretId=arn)["SecretString"])


def _unconfigured() -> str:
    raise ServerSecretUnavailable(
        "no server secret: set CAIRN_SERVER_SECRET_ARN (a Secrets Manager secret) or CAIRN_SERVER_SECRET"
    )
