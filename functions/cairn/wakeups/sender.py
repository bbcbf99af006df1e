"""Deliver a subscription's pending events, in sequence order, with durable back-off.

One sender at a time holds a subscription's lease, so deliveries to it are
attempted in order; a failure schedules the next attempt (doubling from
`wake_retry_base_seconds`) and gives the lease back, so a failing target
holds up nothing but itself. After `wake_retry_window_seconds` of failures,
or at once when the target can never take the delivery (a permanent
failure), the subscription is marked failed and a `subscription.failed`
event, with the last attempt's error as its reason, is appended to the
address (a failed subscription receives nothing more, that event included).
"""

from __future__ import annotations

import enum
import json
import uuid

from msgspec.structs import replace

from cairn.addresses.models import Event, NewEvent
from cairn.addresses.ports import AddressStore, AppendRequest, Waiter
from cairn.clock import Clock
from cairn.errors import CairnError
from cairn.settings import Settings
from cairn.wakeups.models import Attempt, Outcome, Subscription, SubscriptionStatus
from cairn.wakeups.payload import event_delivery
from cairn.wakeups.ports import Progress, SubscriptionStore
from cairn.wakeups.transports import Transport, send_once

ATTEMPTS_KEPT = 10
# A lease outlives a whole run and its last attempt; a crashed sender's lease lapses after it.
LEASE_SECONDS = 120.0
# Events one lease delivers, and how long it starts new attempts, before it hands over (the sweep
# continues at once): a run, each attempt within its deadline (60 s at most), ends well inside the
# lease and inside the Lambda invocation that runs it, however slowly a target answers.
MAX_EVENTS_PER_LEASE = 200
RUN_SECONDS = 30.0
PAGE_SIZE = 50
FAILED_TYPE = "subscription.failed"
WAKEUP_SURFACE = "wakeups"


class Run(enum.Enum):
    """What `Sender.deliver` did."""

    DELIVERED = "delivered"  # it held the lease and delivered what was pending (or met a failure)
    BUSY = "busy"  # another sender holds the lease; a check is scheduled for when it lapses
    IDLE = "idle"  # nothing to do: no such subscription, not active, or waiting out a back-off


class Sender:
    def __init__(
        self,
        subscriptions: SubscriptionStore,
        addresses: AddressStore,
        transport: Transport,
        waiter: Waiter,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._subscriptions = subscriptions
        self._addresses = addresses
        self._transport = transport
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def deliver(self, address_id: str, subscription_id: str) -> Run:
        """Deliver every pending event the subscription wants, oldest first, until done or failing."""
        owner = uuid.uuid4().hex
        # To the millisecond, as the table keeps a lease's end: a lease refused as still held is then also
        # seen as held by `_not_acquired`, which has the subscription checked again when it lapses.
        now = round(self._clock(), 3)
        held = self._subscriptions.acquire(address_id, subscription_id, owner, now=now, lease_seconds=LEASE_SECONDS)
        if held is None:
            return self._not_acquired(address_id, subscription_id, now)
        subscription: Subscription = held
        if subscription.expires_at is not None and subscription.expires_at <= now:
            # Its address has expired: what it holds goes to no one, now or later (its item awaits DynamoDB's TTL).
            self._advance(
                subscription, owner, self._progress(subscription, subscription.cursor, status=SubscriptionStatus.ENDED)
            )
            return Run.IDLE
        saved = subscription.cursor
        cursor = subscription.cursor
        sent = 0
        unlisted: int | None = None
        while True:
            page = self._addresses.list_events(
                address_id, after=cursor, limit=PAGE_SIZE, now=self._clock(), max_bytes=self._settings.max_page_bytes
            )
            if not page.events:
                noted = self._subscriptions.release(address_id, subscription_id, owner, cursor=cursor)
                if noted is None:
                    return Run.DELIVERED
                if noted == unlisted:
                    # Noted, then listed twice and not there: trimmed or expired before they were delivered.
                    cursor = noted
                # Noted after the last list, it is committed: the next list has it.
                unlisted = noted
                continue
            for event in page.events:
                if subscription.wants(event.type):
                    if sent == MAX_EVENTS_PER_LEASE or self._clock() - now >= RUN_SECONDS:
                        return self._hand_over(subscription, owner, cursor)
                    sent += 1
                    next_state = self._attempt(subscription, owner, event)
                    if next_state is None:
                        return Run.DELIVERED
                    subscription = next_state
                cursor = event.sequence
            if subscription.cursor > saved:
                # One write per page of deliveries: a crash before it repeats them (delivery is at least once).
                progress = self._progress(subscription, subscription.cursor, keep_lease=True)
                if self._advance(subscription, owner, progress) is None:
                    return Run.DELIVERED
                saved = subscription.cursor

    def _hand_over(self, subscription: Subscription, owner: str, cursor: int) -> Run:
        """A long backlog or a slow target: let go so other work interleaves; the sweep continues at once."""
        self._advance(subscription, owner, self._progress(subscription, cursor))
        self._subscriptions.schedule(subscription.address_id, subscription.id, self._clock())
        return Run.DELIVERED

    def _not_acquired(self, address_id: str, subscription_id: str, now: float) -> Run:
        current = self._subscriptions.get(address_id, subscription_id)
        if current is None or current.status is not SubscriptionStatus.ACTIVE:
            return Run.IDLE
        if current.lease_until is not None and current.lease_until >= now:
            # The holder sees newly noted events before it lets go; this check covers a holder that died.
            self._subscriptions.schedule(address_id, subscription_id, current.lease_until)
            return Run.BUSY
        return Run.IDLE

    def _attempt(self, subscription: Subscription, owner: str, event: Event) -> Subscription | None:
        """One attempt; the subscription as it continues, or None when this lease stops here."""
        now = self._clock()
        delivery = event_delivery(subscription.address_id, subscription.id, event)
        outcome = send_once(self._transport, subscription, delivery, now)
        if outcome.delivered and subscription.target.one_shot:
            attempt = _attempt(now, "ended", event.sequence, outcome)
            ended = self._progress(subscription, event.sequence, attempt, status=SubscriptionStatus.ENDED)
            self._advance(subscription, owner, ended)
            return None
        if outcome.delivered:
            # Written with the page (`deliver`), or with whatever ends this lease first.
            attempt = _attempt(now, "delivered", event.sequence, outcome)
            return replace(
                subscription,
                cursor=event.sequence,
                attempts=(attempt, *subscription.attempts)[:ATTEMPTS_KEPT],
                retry_at=None,
                failing_since=None,
                failures=0,
            )
        if outcome.gone:
            attempt = _attempt(now, "ended", event.sequence, outcome)
            progress = self._progress(subscription, event.sequence - 1, attempt, status=SubscriptionStatus.ENDED)
            self._advance(subscription, owner, progress)
            return None
        self._fail(subscription, owner, event, outcome, now)
        return None

    def _fail(self, subscription: Subscription, owner: str, event: Event, outcome: Outcome, now: float) -> None:
        failing_since = subscription.failing_since or now
        failures = subscription.failures + 1
        settings = self._settings
        if outcome.permanent or now - failing_since >= settings.wake_retry_window_seconds:
            attempt = _attempt(now, "failed", event.sequence, outcome)
            progress = self._progress(
                subscription, event.sequence - 1, attempt, status=SubscriptionStatus.FAILED, failures=failures
            )
            if self._advance(subscription, owner, progress):
                self._announce_failure(subscription, event, failures, outcome, now)
            return
        delay = min(settings.wake_retry_base_seconds * 2 ** (failures - 1), settings.wake_retry_max_interval_seconds)
        retry_at = round(now + delay, 3)
        attempt = _attempt(now, "failed", event.sequence, outcome, next_retry_at=retry_at)
        progress = self._progress(
            subscription,
            event.sequence - 1,
            attempt,
            retry_at=retry_at,
            failing_since=failing_since,
            failures=failures,
        )
        if self._advance(subscription, owner, progress):
            self._subscriptions.schedule(subscription.address_id, subscription.id, retry_at)

    def _announce_failure(
        self, subscription: Subscription, event: Event, failures: int, outcome: Outcome, now: float
    ) -> None:
        data = {
            "subscription_id": subscription.id,
            "target_kind": subscription.target.kind.value,
            "undelivered_sequence": event.sequence,
            "attempts": failures,
            # What the last attempt met: why the subscription stopped (a webhook's answer has no error text).
            "reason": outcome.error or f"HTTP {outcome.status_code}",
        }
        notice = NewEvent(FAILED_TYPE, "cairn", json.dumps(data, sort_keys=True), WAKEUP_SURFACE)
        try:
            self._addresses.append(
                AppendRequest(address_id=subscription.address_id, events=[notice], credential=None, now=now)
            )
        except CairnError:
            # The address is gone or full: nobody is left to tell.
            return
        self._waiter.notify(subscription.address_id)

    def _progress(
        self,
        subscription: Subscription,
        cursor: int,
        attempt: Attempt | None = None,
        *,
        status: SubscriptionStatus = SubscriptionStatus.ACTIVE,
        retry_at: float | None = None,
        failing_since: float | None = None,
        failures: int = 0,
        keep_lease: bool = False,
    ) -> Progress:
        attempts = subscription.attempts if attempt is None else (attempt, *subscription.attempts)[:ATTEMPTS_KEPT]
        return Progress(
            cursor=max(cursor, subscription.cursor),
            attempts=attempts,
            status=status,
            retry_at=retry_at,
            failing_since=failing_since,
            failures=failures,
            keep_lease=keep_lease,
        )

    def _advance(self, subscription: Subscription, owner: str, progress: Progress) -> Subscription | None:
        if not self._subscriptions.advance(subscription.address_id, subscription.id, owner, progress):
            return None
        return replace(
            subscription,
            cursor=progress.cursor,
            attempts=progress.attempts,
            status=progress.status,
            retry_at=progress.retry_at,
            failing_since=progress.failing_since,
            failures=progress.failures,
        )


def _attempt(
    now: float, outcome: str, sequence: int, result: Outcome, *, next_retry_at: float | None = None
) -> Attempt:
    return Attempt(
        at=now,
        outcome=outcome,
        sequence=sequence,
        status_code=result.status_code,
        error=result.error,
        next_retry_at=next_retry_at,
    )
