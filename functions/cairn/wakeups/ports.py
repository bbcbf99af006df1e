"""What wake-ups need from storage, in their own terms (implemented in `cairn.dynamodb`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from cairn.wakeups.models import Attempt, SigningSecret, Subscription, SubscriptionStatus


class Progress(msgspec.Struct, frozen=True):
    """What one delivery changed, written under the sender's lease."""

    cursor: int
    attempts: tuple[Attempt, ...]
    status: SubscriptionStatus
    retry_at: float | None
    failing_since: float | None
    failures: int
    # False gives the lease back with this write (a failure waits for the sweep; an end is final).
    keep_lease: bool = False


class DueRetry(msgspec.Struct, frozen=True):
    """A subscription whose back-off has run out, found by the sweep."""

    address_id: str
    subscription_id: str
    token: str  # what `done` needs to remove it


class CursorMoved(Exception):
    """The address took an event after the subscription's cursor was read: read it again."""


class SubscriptionExists(Exception):
    """A subscription with the new one's id is already stored (a one-shot target's id is its target's)."""


class SubscriptionStore(Protocol):
    def create(self, subscription: Subscription, *, max_per_address: int, expires_at: float | None) -> None:
        """Store a new subscription of a live address (gone with it at `expires_at`).

        Only while the address's last event is still the subscription's cursor
        (`CursorMoved` otherwise), so an event committed meanwhile is neither
        owed to the subscription nor missed by the dispatcher.
        `SubscriptionLimitExceeded` at the limit; `Unauthorized` once the address is deleted;
        `SubscriptionExists` when its id is taken.
        """

    def of_address(self, address_id: str) -> list[Subscription]:
        """Every subscription of an address, oldest first."""

    def get(self, address_id: str, subscription_id: str) -> Subscription | None: ...

    def delete(self, address_id: str, subscription_id: str) -> bool:
        """Remove it (and free its place under the limit); False if there was none."""

    def rotate(self, address_id: str, subscription_id: str, secrets: Sequence[SigningSecret]) -> Subscription | None:
        """Replace the signing secrets; None if there is no such webhook subscription."""

    def record_attempts(self, address_id: str, subscription_id: str, attempts: Sequence[Attempt]) -> None:
        """Replace the recent attempts (a test delivery's; nothing else changes)."""

    def note_event(self, address_id: str, subscription_id: str, sequence: int) -> None:
        """Remember that events up to `sequence` exist, so a sender holding the lease looks again."""

    def acquire(
        self, address_id: str, subscription_id: str, owner: str, *, now: float, lease_seconds: float
    ) -> Subscription | None:
        """Take the delivery lease of an active subscription that is due; None if another holds it or it waits."""

    def advance(self, address_id: str, subscription_id: str, owner: str, progress: Progress) -> bool:
        """Write progress under the lease; False once the lease (or the subscription) is gone."""

    def release(self, address_id: str, subscription_id: str, owner: str, *, cursor: int) -> int | None:
        """Give the lease back (None, also when it was no longer held) unless events after `cursor` were
        noted meanwhile: then the last sequence noted, and the holder keeps going."""

    def schedule(self, address_id: str, subscription_id: str, at: float) -> None:
        """Have the sweep hand the subscription to a sender at `at`."""

    def due(self, now: float, limit: int) -> list[DueRetry]:
        """Scheduled subscriptions whose time has come, earliest first."""

    def done(self, due: DueRetry) -> None:
        """Forget a scheduled retry that the sweep handed over."""
