"""Test doubles for time."""

from __future__ import annotations

import threading
import time


class FakeClock:
    """Starts at the real time and moves only when told to."""

    def __init__(self) -> None:
        self._now = time.time()
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
