"""Time as the service sees it: epoch seconds in, ISO-8601 UTC out.

Use cases take a `Clock` so tests can move time instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]

system_clock: Clock = time.time


def iso(epoch_seconds: float) -> str:
    """Millisecond ISO-8601 in UTC, e.g. `2026-11-29T13:15:51.123Z`."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
