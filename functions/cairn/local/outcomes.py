"""`cairn serve`'s part of the outcome sweep's schedule: settle passed outcome deadlines soon after they pass.

In AWS a schedule runs `OutcomeSweep` every few minutes; here a daemon
thread runs the very same sweep while the server is up. Local mailers report
at once, so it matters for sends whose hand-off a stopped server cut short.
"""

from __future__ import annotations

import logging
import threading

from botocore.exceptions import BotoCoreError, ClientError

from cairn.email.outcome_sweep import OutcomeSweep

logger = logging.getLogger(__name__)

# The sweep runs a tenth of the deadline apart, within these bounds: every 2 s for the deadlines of a few
# seconds that tests set, once a minute for the default two days (each run is a query, even when idle).
SWEEP_SECONDS = 2.0
LONGEST_SWEEP_SECONDS = 60.0


def outcome_sweep_interval(deadline_seconds: float) -> float:
    """How often to sweep for deadlines of `deadline_seconds`: each is settled at most a tenth of it late
    (or 2 s, the shortest rest)."""
    return min(max(deadline_seconds / 10, SWEEP_SECONDS), LONGEST_SWEEP_SECONDS)


class OutcomeSweepLoop:
    """Runs `sweep` every `interval` seconds in a daemon thread while the context is open."""

    def __init__(self, sweep: OutcomeSweep, *, interval: float = SWEEP_SECONDS) -> None:
        self._sweep = sweep
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sweep_forever, name="outcome-sweep", daemon=True)

    def __enter__(self) -> OutcomeSweepLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sweep_forever(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sweep.run(until=self._stop.is_set)
            except (ClientError, BotoCoreError):
                # DynamoDB Local unreachable for a moment: the deadlines wait for the next round.
                logger.warning("sweeping outcome deadlines failed; retrying", exc_info=True)
