"""From new events on the table's stream to senders, and from due retries back to senders.

The same code runs in Lambda (the stream's event source mapping calls
`Dispatcher.dispatch` with a batch; a schedule calls `Sweep.run`) and in
`cairn serve` (a thread reads DynamoDB Local's stream, another sweeps every
second). Senders run in parallel threads, one per subscription, so a slow
target does not delay the others.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from cairn.clock import Clock
from cairn.wakeups.models import EventNotice, SubscriptionStatus
from cairn.wakeups.ports import SubscriptionStore
from cairn.wakeups.sender import Sender

logger = logging.getLogger(__name__)

SENDER_THREADS = 16
SWEEP_BATCH = 100


class Dispatcher:
    def __init__(self, subscriptions: SubscriptionStore, sender: Sender, *, threads: int = SENDER_THREADS) -> None:
        self._subscriptions = subscriptions
        self._sender = sender
        self._threads = threads

    def dispatch(self, notices: Sequence[EventNotice]) -> list[EventNotice]:
        """Hand each address's subscriptions that want one of its new events to a sender.

        Returns the notices of addresses that could not be handled (storage
        trouble), for the caller to retry: Lambda reports them as batch item
        failures, `cairn serve` reads them again.
        """
        by_address: dict[str, list[EventNotice]] = defaultdict(list)
        for notice in notices:
            by_address[notice.address_id].append(notice)
        failed: list[EventNotice] = []
        with ThreadPoolExecutor(max_workers=self._threads) as pool:
            runs = {address: pool.submit(self._address, address, items) for address, items in by_address.items()}
            for address_id, run in runs.items():
                if run.exception() is not None:
                    logger.warning("wake-up dispatch failed for an address", exc_info=run.exception())
                    failed.extend(by_address[address_id])
        return failed

    def _address(self, address_id: str, notices: list[EventNotice]) -> None:
        last = max(notice.sequence for notice in notices)
        types = {notice.type for notice in notices}
        wanted = [
            subscription.id
            for subscription in self._subscriptions.of_address(address_id)
            if subscription.status is SubscriptionStatus.ACTIVE and any(subscription.wants(kind) for kind in types)
        ]
        for subscription_id in wanted:
            self._subscriptions.note_event(address_id, subscription_id, last)
        with ThreadPoolExecutor(max_workers=max(1, min(len(wanted), self._threads))) as pool:
            for run in [pool.submit(self._sender.deliver, address_id, sub_id) for sub_id in wanted]:
                run.result()


class Sweep:
    """Hands subscriptions whose retry is due to a sender."""

    def __init__(self, subscriptions: SubscriptionStore, sender: Sender, clock: Clock) -> None:
        self._subscriptions = subscriptions
        self._sender = sender
        self._clock = clock

    def run(self, *, until: Callable[[], bool] = lambda: False) -> int:
        """Deliver every due retry (in batches, earliest first); how many were handed over."""
        handed = 0
        while not until():
            due = self._subscriptions.due(self._clock(), SWEEP_BATCH)
            if not due:
                return handed
            with ThreadPoolExecutor(max_workers=SENDER_THREADS) as pool:
                runs = {pool.submit(self._sender.deliver, item.address_id, item.subscription_id): item for item in due}
                for run, item in runs.items():
                    if run.exception() is None:
                        self._subscriptions.done(item)
                        handed += 1
                    else:
                        logger.warning("wake-up retry failed", exc_info=run.exception())
            if len(due) < SWEEP_BATCH:
                return handed
        return handed
