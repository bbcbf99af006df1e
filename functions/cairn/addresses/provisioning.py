"""Provision, describe and delete addresses: no account, one read token."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable

import msgspec

from cairn import credentials, jsontext
from cairn.addresses import inbox_settings
from cairn.addresses.access import require_well_formed
from cairn.addresses.feed import Feed
from cairn.addresses.inbox_settings import InboxSettings
from cairn.addresses.models import AddressRecord, FeedCounts
from cairn.addresses.ports import (
    AddressStore,
    AlreadyProvisioned,
    CredentialDerivation,
    ProvisionClaim,
    RateCount,
    RateSpent,
    StateStore,
)
from cairn.addresses.state_model import StateUsage
from cairn.clock import Clock
from cairn.errors import IdempotencyKeyNotRandom, IdempotencyKeyReused, InvalidRequest, RateLimited, Unauthorized
from cairn.server_secret import ServerSecret
from cairn.settings import Settings

# A provisioning key is, with the server secret, the seed of the address's credentials (see
# `credentials.derived_read_token`), and a retry under it is answered with them: shorter keys could be guessed.
MIN_PROVISION_KEY_LENGTH = 32
# No random draw of 32 or more characters has fewer different ones than this: such a key was typed.
MIN_DISTINCT_KEY_CHARACTERS = 6


class Provisioned(msgspec.Struct, frozen=True):
    """A new address with the secrets that are shown this once only."""

    record: AddressRecord
    read_token: str
    inbox_secret: str
    # True when an `Idempotency-Key` retry is answered with the address it made before.
    replayed: bool = False


class AddressOverview(msgspec.Struct, frozen=True):
    record: AddressRecord
    counts: FeedCounts
    state: StateUsage


class Provisioning:
    def __init__(
        self,
        table: AddressStore,
        state: StateStore,
        feed: Feed,
        settings: Settings,
        clock: Clock,
        *,
        server_secret: ServerSecret,
        before_delete: Callable[[str], None] = lambda address_id: None,
    ) -> None:
        self._table = table
        self._server_secret = server_secret
        self._state = state
        self._feed = feed
        self._settings = settings
        self._clock = clock
        # What else an address's deletion removes, outside the table (its stored mail), once the owner is admitted.
        self._before_delete = before_delete

    def provision(
        self,
        *,
        client_ip: str,
        task_id: str | None = None,
        name: str | None = None,
        expires_in_seconds: int | None = None,
        keep_headers: Iterable[str] | None = None,
        idempotency_key: str | None = None,
    ) -> Provisioned:
        """A new address; `keep_headers` (None: none) are the request headers its inbox keeps on each event.

        With `idempotency_key`, the same key and request answer the same
        address and credentials again, however often it is sent and whoever
        races; the key and request are checked before anything is written.
        """
        settings = self._settings
        if idempotency_key is not None:
            self._check_key(idempotency_key)
        inbox = InboxSettings()
        if keep_headers is not None:
            inbox = InboxSettings(keep_headers=inbox_settings.keep_headers(keep_headers), revision=1)
        if expires_in_seconds is not None and not (
            settings.min_expires_in_seconds <= expires_in_seconds <= settings.max_expires_in_seconds
        ):
            raise InvalidRequest(
                f"expires_in_seconds must be between {settings.min_expires_in_seconds}"
                f" and {settings.max_expires_in_seconds}.",
                field="expires_in_seconds",
            )
        now = self._clock()
        address_id = credentials.new_address_id()
        claim = None
        if idempotency_key is None:
            read_token = credentials.new_read_token()
            inbox_secret = credentials.new_inbox_secret()
        else:
            seed = self._server_secret.provisioning_key(idempotency_key)
            read_token = credentials.derived_read_token(seed, address_id)
            inbox_secret = credentials.derived_inbox_secret(seed, address_id)
            asked = [task_id, name, expires_in_seconds, None if keep_headers is None else sorted(inbox.keep_headers)]
            claim = ProvisionClaim(credentials.digest(idempotency_key), credentials.digest(jsontext.canonical(asked)))
        lifetime = expires_in_seconds or settings.default_expires_in_seconds or None
        record = AddressRecord(
            id=address_id,
            task_id=task_id,
            name=name,
            email=f"{address_id}@{settings.email_domain}",
            created_at=round(now, 3),
            expires_at=None if lifetime is None else int(now) + lifetime,
            read_token_digest=credentials.digest(read_token),
            inbox_secret_digest=credentials.digest(inbox_secret),
            inbox=inbox,
        )
        # The client's creation rate is counted in the same transaction that stores the head.
        rate = RateCount(scope="create", subject=client_ip, limit=settings.create_rate_per_minute)
        try:
            self._table.create(record, rate=rate, claim=claim)
        except AlreadyProvisioned as claimed:
            assert idempotency_key is not None and claim is not None
            return self._replay(idempotency_key, claim, claimed, now)
        except RateSpent as spent:
            raise RateLimited(
                f"At most {settings.create_rate_per_minute} addresses per minute from one client.",
                retry_after=spent.retry_after,
            ) from None
        return Provisioned(record=record, read_token=read_token, inbox_secret=inbox_secret)

    def _check_key(self, idempotency_key: str) -> None:
        limit = self._settings.max_idempotency_key_length
        if not MIN_PROVISION_KEY_LENGTH <= len(idempotency_key) <= limit or not idempotency_key.isprintable():
            raise InvalidRequest(
                f"An Idempotency-Key on provisioning must be {MIN_PROVISION_KEY_LENGTH} to {limit} printable "
                "characters: the address's credentials derive from it, so make it random (128 bits or more).",
                field="Idempotency-Key",
            )
        if not looks_random(idempotency_key):
            raise IdempotencyKeyNotRandom(
                "This Idempotency-Key is not random (too few different characters, or a pattern repeated): "
                "the address's credentials derive from it, so draw it at random (128 bits or more, such as a UUID4).",
                field="Idempotency-Key",
            )

    def _replay(
        self, idempotency_key: str, claim: ProvisionClaim, claimed: AlreadyProvisioned, now: float
    ) -> Provisioned:
        """The address this key made, with its credentials derived again; refused if the request differs."""
        if claimed.request_digest != claim.request_digest:
            raise IdempotencyKeyReused("This Idempotency-Key provisioned an address for a different request.")
        record = self._table.load(claimed.address_id)
        seed = self._seed(idempotency_key, claimed.derivation)
        read_token = credentials.derived_read_token(seed, claimed.address_id)
        if record is None or not record.is_live(now) or not credentials.matches(read_token, record.read_token_digest):
            raise IdempotencyKeyReused("The address this Idempotency-Key provisioned is deleted or expired.")
        inbox_secret = credentials.derived_inbox_secret(seed, claimed.address_id)
        return Provisioned(record=record, read_token=read_token, inbox_secret=inbox_secret, replayed=True)

    def _seed(self, idempotency_key: str, derivation: CredentialDerivation) -> bytes:
        """What the address's credentials were derived under: its claim says how."""
        if derivation is CredentialDerivation.KEY:
            # Provisioned before the server secret: its stored digests are of credentials from the key alone.
            return idempotency_key.encode()
        return self._server_secret.provisioning_key(idempotency_key)

    def describe(self, address_id: str, read_token: str | None) -> AddressOverview:
        """The address, its feed's depth (kept on its head: no event is read) and its state usage.

        Counts against the address's poll rate, as a poll does.
        """
        now = self._clock()
        record = self._feed.admit_read(address_id, read_token)
        return AddressOverview(
            record=record,
            counts=self._table.count_events(address_id, now=now),
            state=self._state.usage(address_id),
        )

    def delete(self, address_id: str, read_token: str | None) -> None:
        """Refused exactly like `authenticate`, except that an interrupted deletion may be repeated and an
        expired address that storage still holds may be deleted: its owner need not wait for TTL."""
        require_well_formed(address_id)
        if not read_token:
            raise Unauthorized()
        # Once the address is closed, so nothing is added to what it holds meanwhile, and before the table's
        # sweep, which takes the events that say what else it holds.
        closing = functools.partial(self._before_delete, address_id)
        if not self._table.delete(address_id, credentials.digest(read_token), before_sweep=closing):
            raise Unauthorized()


def looks_random(key: str) -> bool:
    """False for a key no random draw gives: few different characters, one of them in most places, or a
    shorter run of characters repeated."""
    counts = Counter(key)
    if len(counts) < MIN_DISTINCT_KEY_CHARACTERS or max(counts.values()) * 2 > len(key):
        return False
    return not any(key[period:] == key[:-period] for period in range(1, len(key) // 2 + 1))
