"""Fixed rate windows: which window a moment falls in, and how long until it ends.

The one arithmetic of every rate count, whichever store keeps the counts.
"""

from __future__ import annotations

# A minute, unless a caller asks for longer.
WINDOW_SECONDS = 60


def window_of(now: float, window_seconds: int = WINDOW_SECONDS) -> int:
    """The number of the window `now` falls in."""
    return int(now) // window_seconds


def retry_after(now: float, window_seconds: int = WINDOW_SECONDS) -> int:
    """Seconds until the window of `now` ends."""
    return max(1, (window_of(now, window_seconds) + 1) * window_seconds - int(now))
