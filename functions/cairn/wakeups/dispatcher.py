"""From new events on the table's stream to senders, and from due retries back to senders.

The same code runs in Lambda (the stream's event source mapping calls
`Dispatcher.dispatch` with a batch; a schedule calls `Sweep.run`) and in
`cairn serve` (a thread reads DynamoDB Local's stream, another sweeps every
second). Every subscription owed a delivery gets a sender thread of its own,
so a slow target delays no other: each attempt ends by its deadline and a
sender's run by `RUN_SECONDS` (`sender.py`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from cairn.clock import Clock
from cairn.wakeups.models import EventNotice, SubscriptionStatus
from cairn.wakeups.ports import SubscriptionStore
from cairn.wakeups.sender import Sender

logger = logging.getLogger(__name__)

# Senders at once: each waits on one target at a time, so this many slow targets together
# are what it takes to make a delivery wait for a thread.
SENDER_THREADS = 64
SWEEP_BATCH = 100


def _never() -> bool:
    return False


class Dispatcher:
    """Stream notices to senders.

    Without `senders` a dispatch waits for the deliveries it started (Lambda:
    the batch ends when they have); `detached` gives one that leaves them
    running on a long-lived pool, so `cairn serve`'s stream reader reads on.
    """

    def __init__(
        self,
        subscriptions: SubscriptionStore,
        sender: Sender,
        clock: Clock,
        *,
        threads: int = SENDER_THREADS,
        senders: Executor | None = None,
    ) -> None:
        self._subscriptions = subscriptions
        self._sender = sender
        self._clock = clock
        self._threads = threads
        self._senders = senders

    def detached(self, senders: Executor) -> Dispatcher:
        """This dispatcher, handing deliveries to `senders` without waiting for them."""
        return Dispatcher(self._subscriptions, self._sender, self._clock, threads=self._threads, senders=senders)

    def dispatch(self, notices: Sequence[EventNotice], *, until: Callable[[], bool] = _never) -> list[EventNotice]:
        """Hand each address's subscriptions that want one of its new events to a sender.

        Returns the notices of addresses that could not be handled (storage
        trouble), for the caller to retry: Lambda reports them as batch item
        failures, `cairn serve` reads them again. A delivery's own failure is
        no such trouble: it is an attempt recorded, retried by the sweep.
        A delivery not yet started once `until()` is true is left to the sweep
        (its events are noted): more deliveries are owed than the threads can
        run before Lambda's deadline, which would cut them off and send the
        whole batch again.
        """
        by_address: dict[str, list[EventNotice]] = defaultdict(list)
        for notice in notices:
            # An event written while its address had no subscription is owed to nobody: no read needed.
            if not notice.unsubscribed:
                by_address[notice.address_id].append(notice)
        owed, failed = self._note(by_address)
        if self._senders is not None:
            for address_id, subscription_id in owed:
                self._senders.submit(self._deliver_detached, address_id, subscription_id)
        elif owed:
            with ThreadPoolExecutor(max_workers=min(len(owed), self._threads)) as pool:
                runs = [(address, pool.submit(self._deliver_by, address, sub_id, until)) for address, sub_id in owed]
            for address_id, run in runs:
                if run.exception() is not None:
                    logger.warning("wake-up delivery failed for an address", exc_info=run.exception())
                    failed.add(address_id)
        return [notice for notice in notices if notice.address_id in failed]

    def _note(self, by_address: dict[str, list[EventNotice]]) -> tuple[list[tuple[str, str]], set[str]]:
        """Subscriptions owed a delivery, their new events noted, and the addresses that could not be read."""
        owed: list[tuple[str, str]] = []
        failed: set[str] = set()
        if not by_address:
            return owed, failed
        with ThreadPoolExecutor(max_workers=min(len(by_address), self._threads)) as pool:
            runs = {address: pool.submit(self._wanting, address, items) for address, items in by_address.items()}
        for address_id, run in runs.items():
            if run.exception() is not None:
                logger.warning("wake-up dispatch failed for an address", exc_info=run.exception())
                failed.add(address_id)
            else:
                owed.extend((address_id, subscription_id) for subscription_id in run.result())
        return owed, failed

    def _wanting(self, address_id: str, notices: list[EventNotice]) -> list[str]:
        last = max(notice.sequence for notice in notices)
        types = {notice.type for notice in notices}
        wanted = [
            subscription.id
            for subscription in self._subscriptions.of_address(address_id)
            if subscription.status is SubscriptionStatus.ACTIVE and any(subscription.wants(kind) for kind in types)
        ]
        for subscription_id in wanted:
            self._subscriptions.note_event(address_id, subscription_id, last)
        return wanted

    def _deliver_by(self, address_id: str, subscription_id: str, until: Callable[[], bool]) -> None:
        if until():
            self._subscriptions.schedule(address_id, subscription_id, self._clock())
            return
        self._sender.deliver(address_id, subscription_id)

    def _deliver_detached(self, address_id: str, subscription_id: str) -> None:
        try:
            self._sender.deliver(address_id, subscription_id)
        except Exception:
            # Nobody waits for this run: have the sweep try again rather than leave noted events undelivered.
            logger.warning("wake-up delivery failed; the sweep tries again", exc_info=True)
            try:
                self._subscriptions.schedule(address_id, subscription_id, self._clock())
            except Exception:
                logger.warning("scheduling a wake-up retry failed", exc_info=True)


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
            before = handed
            with ThreadPoolExecutor(max_workers=min(len(due), SENDER_THREADS)) as pool:
                runs = {pool.submit(self._sender.deliver, item.address_id, item.subscription_id): item for item in due}
                for run, item in runs.items():
                    if run.exception() is None:
                        self._subscriptions.done(item)
                        handed += 1
                    else:
                        logger.warning("wake-up retry failed", exc_info=run.exception())
            # A short batch was the last; one of which nothing could be handed over (storage trouble) is left to
            # the next run, rather than read again at once until the deadline.
            if len(due) < SWEEP_BATCH or handed == before:
                return handed
        return handed
