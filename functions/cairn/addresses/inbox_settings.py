"""What an address's inbox does beyond appending: headers it keeps, signatures it checks.

The owner (read token) chooses them (`inbox_config`); they live on the
address head with a revision, and an inbox append is conditioned on the
revision it was checked against, so a delivery never commits under settings
it was not checked with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal, get_args

import msgspec
from msgspec.structs import replace

from cairn.errors import InvalidRequest
from cairn.values import repr_without

if TYPE_CHECKING:
    from cairn.server_secret import ServerSecret

MAX_KEPT_HEADERS = 16
MAX_SECRET_LENGTH = 1024
# Credentials of the poster's own session: an agent reading its feed has no business with them.
NEVER_KEPT = frozenset({"authorization", "proxy-authorization", "cookie"})
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")

VerifierKind = Literal["github", "stripe", "slack", "standard_webhooks"]
GITHUB, STRIPE, SLACK, STANDARD_WEBHOOKS = get_args(VerifierKind)
# The kinds, with the timestamp tolerance each takes by default (None: the scheme signs no time).
DEFAULT_TOLERANCE: dict[str, int | None] = {GITHUB: None, STRIPE: 300, SLACK: 300, STANDARD_WEBHOOKS: 300}
MAX_TOLERANCE_SECONDS = 3600


class Verifier(msgspec.Struct, frozen=True):
    """A provider's signing secret for this inbox; `secret` is never shown again once registered.

    `secret` is stored `sealed` by the server secret (`sealed_verifiers`); one registered before
    secrets were sealed is as it was given until the settings next change (`signing_secret` reads both).
    """

    kind: str
    secret: str
    tolerance_s: int | None
    created_at: float
    sealed: bool = False

    def __repr__(self) -> str:
        return repr_without(self, "secret")


class InboxSettings(msgspec.Struct, frozen=True):
    """The headers an inbox keeps on each event and the verifiers a delivery must pass (one of).

    `revision` counts changes (0: never set), so appends can be conditioned on it.
    """

    keep_headers: tuple[str, ...] = ()
    verifiers: tuple[Verifier, ...] = ()
    revision: int = 0

    def kept(self, headers: Mapping[str, str]) -> dict[str, str] | None:
        """The kept headers present on a request (`headers` by lower-case name); None when none are kept."""
        if not self.keep_headers:
            return None
        return {name: headers[name] for name in self.keep_headers if name in headers}


def keep_headers(names: Iterable[str]) -> tuple[str, ...]:
    """Header names to keep, lower-cased and without repeats; `invalid_request` for a bad list."""
    kept: list[str] = []
    for name in names:
        if not _HEADER_NAME.fullmatch(name):
            raise InvalidRequest(f"{name[:80]!r} is not a header name.", field="keep_headers")
        lowered = name.lower()
        if lowered in NEVER_KEPT:
            raise InvalidRequest(f"{name} is never kept: it is a credential.", field="keep_headers")
        if lowered not in kept:
            kept.append(lowered)
    if len(kept) > MAX_KEPT_HEADERS:
        raise InvalidRequest(f"At most {MAX_KEPT_HEADERS} headers can be kept.", field="keep_headers")
    return tuple(kept)


def verifier(kind: str, secret: str, tolerance_s: int | None, *, now: float) -> Verifier:
    """A checked verifier; `invalid_request` for an unknown kind, an unusable secret or tolerance."""
    if kind not in DEFAULT_TOLERANCE:
        raise InvalidRequest(f"kind must be one of {', '.join(DEFAULT_TOLERANCE)}.", field="kind")
    if not secret or len(secret) > MAX_SECRET_LENGTH or not secret.isprintable():
        raise InvalidRequest(f"The secret must be 1 to {MAX_SECRET_LENGTH} printable characters.", field="secret")
    default = DEFAULT_TOLERANCE[kind]
    settable = kind in (STRIPE, SLACK) and 1 <= (tolerance_s or 0) <= MAX_TOLERANCE_SECONDS
    if tolerance_s is not None and not settable:
        fixed = "signs no time" if default is None else f"checks a fixed {default} s"
        why = "" if kind in (STRIPE, SLACK) else f" ({kind} {fixed})"
        raise InvalidRequest(
            f"tolerance_s is 1 to {MAX_TOLERANCE_SECONDS} seconds, for stripe and slack only{why}.",
            field="tolerance_s",
        )
    if kind == STANDARD_WEBHOOKS:
        _standard_webhooks_key(secret)
    return Verifier(
        kind=kind, secret=secret, tolerance_s=default if tolerance_s is None else tolerance_s, created_at=round(now, 3)
    )


def sealed_verifiers(settings: InboxSettings, address_id: str, server_secret: ServerSecret) -> InboxSettings:
    """`settings` with every verifier's secret sealed, those stored as given before sealing existed included."""
    return replace(
        settings,
        verifiers=tuple(
            verifier
            if verifier.sealed
            else replace(
                verifier,
                secret=server_secret.seal(verifier.secret, context=_sealing_context(address_id, verifier.kind)),
                sealed=True,
            )
            for verifier in settings.verifiers
        ),
    )


def signing_secret(verifier: Verifier, address_id: str, server_secret: ServerSecret) -> str:
    """The secret a verifier checks signatures with, unsealed when it was stored sealed."""
    if not verifier.sealed:
        return verifier.secret
    return server_secret.unseal(verifier.secret, context=_sealing_context(address_id, verifier.kind))


def _sealing_context(address_id: str, kind: str) -> str:
    # Bound to its place: a sealed secret copied to another address or verifier does not open there.
    return f"inbox-verifier/{address_id}/{kind}"


def _standard_webhooks_key(secret: str) -> None:
    from standardwebhooks.webhooks import Webhook

    try:
        Webhook(secret)
    except Exception as error:  # the library raises several types for a malformed secret
        raise InvalidRequest("A Standard Webhooks secret is `whsec_` and base64 bytes.", field="secret") from error
