"""Give back the outcome slots whose carrier never reported: `email.outcome_unknown` at the deadline.

Every send reserves a feed slot for its outcome and, in the same commit, a
deadline (`OutcomeDeadlines`). When the deadline passes, the sweep records
the send's outcome as `email.outcome_unknown` through `Sending.record_outcome`,
which spends the slot and tells the client the carrier never said; then it
forgets the deadline. The outcome's claim under the send's event id makes
this safe to repeat and to race: if the real outcome came first, the sweep's
append is a duplicate and writes nothing, and a real report that comes after
the sweep is the duplicate. An address deleted or expired meanwhile is
skipped (`record_outcome` logs it).

The same code runs in Lambda (a schedule calls `run`) and in `cairn serve`
(a thread every few seconds).
"""

from __future__ import annotations

from collections.abc import Callable

from aws_lambda_powertools import Logger

from cairn.clock import Clock
from cairn.email.outbound_ports import OUTCOME_UNKNOWN, DueOutcome, OutcomeDeadlines
from cairn.email.sending import Sending

SWEEP_BATCH = 100
UNKNOWN_DETAIL = "The carrier reported no outcome before the deadline; the message may or may not have arrived."

logger = Logger(service="cairn")


class OutcomeSweep:
    """Spends each reserved outcome slot whose deadline passed unreported on `email.outcome_unknown`."""

    def __init__(self, deadlines: OutcomeDeadlines, sending: Sending, clock: Clock) -> None:
        self._deadlines = deadlines
        self._sending = sending
        self._clock = clock

    def run(self, *, until: Callable[[], bool] = lambda: False) -> int:
        """Settle every deadline that has passed (in batches, earliest first); how many were settled.

        One that fails (storage trouble) stays for the next run, and does not
        hold up the others.
        """
        settled = 0
        while not until():
            due = self._deadlines.due(self._clock(), SWEEP_BATCH)
            before = settled
            for item in due:
                if until():
                    return settled
                settled += self._settle(item)
            # A short batch was the last; a batch none of which could be settled waits for the next run.
            if len(due) < SWEEP_BATCH or settled == before:
                return settled
        return settled

    def _settle(self, item: DueOutcome) -> bool:
        try:
            self._sending.record_outcome(
                item.address_id,
                item.send_event_id,
                OUTCOME_UNKNOWN,
                message_id=item.message_id,
                detail=UNKNOWN_DETAIL,
                attempt=item.attempt,
            )
            self._deadlines.done(item)
        except Exception:
            logger.warning(
                "outcome deadline not settled; retried next run",
                extra={"address_id": item.address_id, "send_event_id": item.send_event_id},
                exc_info=True,
            )
            return False
        return True
