"""Subscriptions of an address (read token): create, list, read, delete, test, rotate the secret."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Sequence

from cairn.addresses.access import authenticate
from cairn.addresses.models import AddressRecord
from cairn.addresses.ports import AddressStore, RateLimiter
from cairn.clock import Clock
from cairn.errors import RateLimited, SubscriptionLimitExceeded, SubscriptionNotFound, TargetRefused, Unavailable
from cairn.server_secret import ServerSecret
from cairn.settings import Settings
from cairn.wakeups import webhook_secrets
from cairn.wakeups.models import (
    MAX_SIGNING_SECRETS,
    Attempt,
    Created,
    SigningSecret,
    Subscription,
    SubscriptionStatus,
    Target,
    TargetKind,
)
from cairn.wakeups.payload import probe_delivery
from cairn.wakeups.ports import CursorMoved, SubscriptionExists, SubscriptionStore
from cairn.wakeups.sender import ATTEMPTS_KEPT
from cairn.wakeups.targets import check_target, deployment_origins
from cairn.wakeups.transports import Transport, send_once

# A rotated-out secret keeps signing this long, so receivers can switch without losing a delivery
# (unless the subscription is rotated again meanwhile: only the newest two secrets are kept).
ROTATION_OVERLAP_SECONDS = 86_400
_SUBSCRIPTION_ID = re.compile(r"sub_[0-9a-f]{24}")
# Tries at committing a subscription while events keep arriving at its address.
_CREATE_ATTEMPTS = 8
# Test deliveries an address may send a minute, over all its subscriptions: each is sent at
# once, while the request waits, to a target the owner chose.
TESTS_PER_MINUTE = 10


def one_shot_id(address_id: str, target: Target) -> str:
    """The id of an address's subscription to a one-shot target, the same however often it is subscribed.

    So the store itself keeps two requests at once from subscribing a target
    twice: one subscription would complete the wait, and the other fail.
    """
    identity = json.dumps([address_id, target.kind, sorted(target.params.items())], separators=(",", ":"))
    return f"sub_{hashlib.sha256(identity.encode()).hexdigest()[:24]}"


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class Subscriptions:
    def __init__(
        self,
        addresses: AddressStore,
        store: SubscriptionStore,
        transport: Transport,
        limiter: RateLimiter,
        settings: Settings,
        clock: Clock,
        server_secret: ServerSecret,
    ) -> None:
        self._addresses = addresses
        self._limiter = limiter
        self._store = store
        self._transport = transport
        self._settings = settings
        self._clock = clock
        self._server_secret = server_secret

    def create(
        self,
        address_id: str,
        read_token: str | None,
        target: Target,
        *,
        types: Sequence[str] = (),
        description: str | None = None,
        origins: Iterable[str] = (),
    ) -> Created:
        """A new subscription that receives the events committed after it; a webhook's secret, once.

        `origins` are the base URLs the request reached this service at; a
        webhook on one of their hosts (or the configured public base URL's)
        is refused, as it would deliver into Cairn itself.
        Its cursor is the address's last event when the subscription commits:
        an event taken in between makes the store refuse, and the cursor is
        read again (a busy address may take a few tries; then `Unavailable`).
        """
        record = self._open(address_id, read_token)
        check_target(
            target,
            allowed_arns=self._settings.wake_target_arns,
            allow_local=self._settings.webhook_allow_local,
            own_origins=[*origins, *deployment_origins(self._settings)],
        )
        if target.one_shot:
            # A durable step run again after a crash subscribes its callback again: the first one serves it.
            for existing in self._store.of_address(address_id):
                if existing.target == target:
                    return Created(existing, None, existing=True)
        secret = new_secret() if target.kind is TargetKind.WEBHOOK else None
        room_made = False
        for _ in range(_CREATE_ATTEMPTS):
            subscription_id = one_shot_id(address_id, target) if target.one_shot else f"sub_{secrets.token_hex(12)}"
            stored = webhook_secrets.seal(self._server_secret, address_id, subscription_id, secret) if secret else None
            subscription = Subscription(
                id=subscription_id,
                address_id=address_id,
                target=target,
                types=tuple(dict.fromkeys(types)),
                description=description,
                # Milliseconds, as stored, so the creation answer and later reads agree.
                created_at=round(self._clock(), 3),
                cursor=record.last_sequence,
                secrets=(SigningSecret(stored),) if stored else (),
            )
            try:
                self._store.create(
                    subscription,
                    max_per_address=self._settings.max_subscriptions_per_address,
                    expires_at=record.expires_at,
                )
            except CursorMoved:
                record = self._open(address_id, read_token)
                continue
            except SubscriptionExists:
                # The same one-shot target subscribed at once by another request: its subscription serves both.
                taken = self._store.get(address_id, subscription.id)
                if taken is not None:
                    return Created(taken, None, existing=True)
                continue
            except SubscriptionLimitExceeded:
                if room_made or not self._remove_ended(address_id):
                    raise
                room_made = True
                continue
            return Created(subscription, secret)
        raise Unavailable()

    def _remove_ended(self, address_id: str) -> bool:
        """Delete the address's ended subscriptions, to make room for a new one; whether there were any.

        An ended subscription will never deliver again: a one-shot target that
        took its event, or a webhook that answered 410. An agent that waits on
        a new durable callback every run would otherwise fill its address's
        slots with them. Failed ones stay until their owner has seen them.
        """
        ended = [item.id for item in self._store.of_address(address_id) if item.status is SubscriptionStatus.ENDED]
        for subscription_id in ended:
            self._store.delete(address_id, subscription_id)
        return bool(ended)

    def list(self, address_id: str, read_token: str | None) -> list[Subscription]:
        self._open(address_id, read_token)
        return self._store.of_address(address_id)

    def get(self, address_id: str, read_token: str | None, subscription_id: str) -> Subscription:
        self._open(address_id, read_token)
        return self._find(address_id, subscription_id)

    def delete(self, address_id: str, read_token: str | None, subscription_id: str) -> None:
        self._open(address_id, read_token)
        if not _SUBSCRIPTION_ID.fullmatch(subscription_id) or not self._store.delete(address_id, subscription_id):
            raise _not_found(subscription_id)

    def rotate(self, address_id: str, read_token: str | None, subscription_id: str) -> Created:
        """A new webhook secret; the one it replaces keeps signing for `ROTATION_OVERLAP_SECONDS`.

        Only that one is kept beside it: an older secret (still in its own
        overlap, or left by rotations before this limit) goes now.
        """
        self._open(address_id, read_token)
        current = self._find(address_id, subscription_id)
        if current.target.kind is not TargetKind.WEBHOOK:
            raise TargetRefused("Only webhook subscriptions have a secret.")
        now = self._clock()
        secret = new_secret()
        overlap_end = now + ROTATION_OVERLAP_SECONDS
        kept = [
            SigningSecret(item.secret, overlap_end if item.expires_at is None else item.expires_at)
            for item in current.secrets
            if item.valid(now)
        ][: MAX_SIGNING_SECRETS - 1]
        stored = webhook_secrets.seal(self._server_secret, address_id, subscription_id, secret)
        rotated = self._store.rotate(address_id, subscription_id, [SigningSecret(stored), *kept])
        if rotated is None:
            raise _not_found(subscription_id)
        return Created(rotated, secret)

    def test(self, address_id: str, read_token: str | None, subscription_id: str) -> Attempt:
        """Send a `subscription.test` delivery now and record the attempt; the feed position does not move."""
        self._open(address_id, read_token)
        subscription = self._find(address_id, subscription_id)
        if subscription.target.one_shot:
            raise TargetRefused("A one-shot target would be used up by a test.")
        now = self._clock()
        retry_after = self._limiter.hit("wake-test", address_id, limit=TESTS_PER_MINUTE, now=now)
        if retry_after is not None:
            raise RateLimited(
                f"At most {TESTS_PER_MINUTE} test deliveries per address a minute.", retry_after=retry_after
            )
        delivery = probe_delivery(address_id, subscription_id, f"test_{secrets.token_hex(12)}", now)
        outcome = send_once(self._transport, subscription, delivery, now)
        attempt = Attempt(
            at=now,
            outcome="delivered" if outcome.delivered else "failed",
            sequence=None,
            status_code=outcome.status_code,
            error=outcome.error,
        )
        self._store.record_attempts(address_id, subscription_id, (attempt, *subscription.attempts)[:ATTEMPTS_KEPT])
        return attempt

    def _open(self, address_id: str, read_token: str | None) -> AddressRecord:
        return authenticate(self._addresses, address_id, read_token, now=self._clock())

    def _find(self, address_id: str, subscription_id: str) -> Subscription:
        found = self._store.get(address_id, subscription_id) if _SUBSCRIPTION_ID.fullmatch(subscription_id) else None
        if found is None:
            raise _not_found(subscription_id)
        return found


def _not_found(subscription_id: str) -> SubscriptionNotFound:
    return SubscriptionNotFound("This address has no such subscription.", subscription_id=subscription_id[:64])
