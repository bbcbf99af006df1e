"""How a long-poll learns that its feed may have grown.

A poll subscribes before it reads, so an append that commits between the
read and the wait still wakes it. Two implementations of
`cairn.addresses.ports.Waiter`:

* `PollingWaiter` (Lambda): no shared memory between instances, so the
  poll simply re-reads DynamoDB after a short, growing pause.
* `NotifyingWaiter` (`cairn serve`): appends in this process notify the
  subscribers of that address, which wake at once, and the listeners of
  every append (the server's stream reader).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cairn.addresses.ports import Subscription


class _Backoff:
    def __init__(self, first: float, longest: float) -> None:
        self._next = first
        self._longest = longest
        self._stop = threading.Event()

    def wait(self, timeout: float) -> None:
        pause = min(self._next, timeout)
        self._next = min(self._next * 2, self._longest)
        self._stop.wait(max(pause, 0.0))


class PollingWaiter:
    """Re-read after 50 ms, doubling up to one second."""

    def __init__(self, first: float = 0.05, longest: float = 1.0) -> None:
        self._first = first
        self._longest = longest

    @contextmanager
    def subscribe(self, address_id: str) -> Iterator[Subscription]:
        yield _Backoff(self._first, self._longest)

    def notify(self, address_id: str) -> None:
        """Other Lambda instances cannot be told; their polls re-read."""


class _Signal:
    def __init__(self, longest: float) -> None:
        self._event = threading.Event()
        self._longest = longest

    def wait(self, timeout: float) -> None:
        self._event.wait(min(max(timeout, 0.0), self._longest))
        self._event.clear()

    def fire(self) -> None:
        self._event.set()


class NotifyingWaiter:
    """In-process wake-ups: each waiting poll holds one event flag.

    Appends made by another process (a second server on the same table) send
    no signal, so a waiting poll also re-reads every `recheck_seconds`.
    """

    def __init__(self, recheck_seconds: float = 5.0) -> None:
        self._recheck = recheck_seconds
        self._lock = threading.Lock()
        self._watchers: dict[str, set[_Signal]] = {}
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every append this process notifies, whatever its address."""
        self._listeners.append(listener)

    @contextmanager
    def subscribe(self, address_id: str) -> Iterator[Subscription]:
        signal = _Signal(self._recheck)
        with self._lock:
            self._watchers.setdefault(address_id, set()).add(signal)
        try:
            yield signal
        finally:
            with self._lock:
                watchers = self._watchers.get(address_id)
                if watchers is not None:
                    watchers.discard(signal)
                    if not watchers:
                        del self._watchers[address_id]

    def notify(self, address_id: str) -> None:
        with self._lock:
            watchers = list(self._watchers.get(address_id, ()))
        for signal in watchers:
            signal.fire()
        for listener in self._listeners:
            listener()
