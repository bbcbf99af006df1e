"""How many events a feed may hold, and how many of them outsiders may fill.

A feed holds at most `max_events` live events. The last `owner_reserve` of
those slots are kept for the owner's own writes (state changes, sends made
with the read token): inbox posts and inbound mail are refused once the feed
holds `max_events - owner_reserve` events, so no stranger can fill a feed so
far that its owner cannot write state. Every append names its writer, and
this is the one place that turns a writer into a capacity.
"""

from __future__ import annotations

import enum

import msgspec

from cairn.errors import QuotaExceeded


class Writer(enum.Enum):
    """Who an append writes for, as far as the feed's slots are concerned."""

    # The read-token holder's own writes: state changes, sends. May use every slot.
    OWNER = "owner"
    # Anyone else: inbox posts, inbound mail. Stops short of the owner's reserve.
    OUTSIDER = "outsider"


class FeedQuota(msgspec.Struct, frozen=True):
    max_events: int
    owner_reserve: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.owner_reserve < self.max_events:
            raise ValueError("the owner's reserve must leave outsiders at least one slot")

    def capacity(self, writer: Writer) -> int:
        """The live events a feed may hold after an append by `writer`."""
        if writer is Writer.OWNER:
            return self.max_events
        return self.max_events - self.owner_reserve

    def refusal(self, writer: Writer) -> QuotaExceeded:
        """The error for an append that would pass `writer`'s capacity."""
        if writer is Writer.OWNER:
            return QuotaExceeded(
                f"The address holds the maximum of {self.max_events} retained events.",
                max_events=self.max_events,
            )
        return QuotaExceeded(
            f"The address holds {self.capacity(writer)} retained events, the most inbox posts and mail may fill;"
            f" the last {self.owner_reserve} of its {self.max_events} slots are kept for its owner.",
            max_events=self.max_events,
            outsider_max_events=self.capacity(writer),
        )
