"""A feed's depth kept on its head, so describing an address reads one item.

Events are counted in blocks of `BLOCK` consecutive sequences. For each
block the head holds how many of its events exist (`fn_<block>`: appended,
less trimmed), how many of those are acknowledged (`fa_<block>`), and the
latest expiry among them (`fx_<block>`). Every figure changes inside the
transaction or update that changes the events: the append adds, the first
acknowledgement adds, the trim subtracts. Expiry changes nothing stored
(TTL deletes events on its own), so a block's events count until its
latest expiry has passed: the figures are exact once a block has fully
expired, and may include up to `BLOCK - 1` expired events of the oldest
block until then. A block can hold live events only while it is within
`max_events` sequences of the head, so appends remove the counters of the
blocks that fall behind, and the head holds about `max_events / BLOCK`
blocks at most (which is why `Settings.max_events` has an upper bound:
the head must stay well within one item).

Heads created before these counters (without `COUNTED`) are counted by
reading their events, as before.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cairn.addresses.models import FeedCounts
from cairn.dynamodb.items import get_int, n

BLOCK = 32
# Set on heads whose counters began with their first event.
COUNTED = "feed_counted"
_PREFIXES = ("fn_", "fa_", "fx_")


def block_of(sequence: int) -> int:
    return sequence // BLOCK


class HeadUpdate(msgspec.Struct):
    """Clauses to merge into an update expression of the head."""

    sets: list[str] = msgspec.field(default_factory=list)
    adds: list[str] = msgspec.field(default_factory=list)
    removes: list[str] = msgspec.field(default_factory=list)
    names: dict[str, str] = msgspec.field(default_factory=dict)
    values: dict[str, Any] = msgspec.field(default_factory=dict)

    def expression(self, *, leading_sets: str = "") -> str:
        sets = [leading_sets] if leading_sets else []
        parts = []
        if sets or self.sets:
            parts.append("SET " + ", ".join(sets + self.sets))
        if self.adds:
            parts.append("ADD " + ", ".join(self.adds))
        if self.removes:
            parts.append("REMOVE " + ", ".join(self.removes))
        return " ".join(parts)


def on_append(last: int, count: int, expires_at: int, max_events: int) -> HeadUpdate:
    """Count `count` events after sequence `last`, expiring at `expires_at`; drop blocks gone behind."""
    update = HeadUpdate()
    if count == 0:
        # A commit that only reserves an outcome slot: no block gains an event or a later expiry.
        return update
    first, new_last = last + 1, last + count
    for index, block in enumerate(range(block_of(first), block_of(new_last) + 1)):
        in_block = min(new_last, (block + 1) * BLOCK - 1) - max(first, block * BLOCK) + 1
        update.adds.append(f"#fn{index} :fn{index}")
        update.sets.append(f"#fx{index} = :fx")
        update.names[f"#fn{index}"] = f"fn_{block}"
        update.names[f"#fx{index}"] = f"fx_{block}"
        update.values[f":fn{index}"] = n(in_block)
    update.values[":fx"] = n(expires_at)
    # Blocks wholly at or below `head - max_events` cannot hold a live event any more.
    behind_before = block_of(max(last - max_events + 1, 0))
    behind_after = block_of(max(new_last - max_events + 1, 0))
    # Never a block this append counts in (an append larger than the feed fails its quota check anyway).
    for index, block in enumerate(range(max(behind_before - 1, 0), min(behind_after, block_of(first)))):
        for prefix in _PREFIXES:
            placeholder = f"#old{prefix[1]}{index}"
            update.removes.append(placeholder)
            update.names[placeholder] = f"{prefix}{block}"
    return update


def on_acknowledge(sequence: int) -> HeadUpdate:
    """Count the first acknowledgement of the event at `sequence`."""
    return HeadUpdate(adds=["#fa :one"], names={"#fa": f"fa_{block_of(sequence)}"}, values={":one": n(1)})


def on_trim(removed: dict[int, tuple[int, int]]) -> HeadUpdate:
    """Uncount trimmed events: per block, (events, of which acknowledged)."""
    update = HeadUpdate()
    for index, (block, (events, acknowledged)) in enumerate(sorted(removed.items())):
        update.adds.append(f"#tn{index} :tn{index}")
        update.names[f"#tn{index}"] = f"fn_{block}"
        update.values[f":tn{index}"] = n(-events)
        if acknowledged:
            update.adds.append(f"#ta{index} :ta{index}")
            update.names[f"#ta{index}"] = f"fa_{block}"
            update.values[f":ta{index}"] = n(-acknowledged)
    return update


def counts(head: dict[str, Any], *, now: float) -> FeedCounts:
    """The feed's depth from a head that carries counters (see `COUNTED`)."""
    retained = acknowledged = 0
    for name in head:
        if not name.startswith("fn_"):
            continue
        block = name.removeprefix("fn_")
        if get_int(head, f"fx_{block}") <= now:
            continue
        retained += max(get_int(head, name), 0)
        acknowledged += max(get_int(head, f"fa_{block}"), 0)
    return FeedCounts(retained=retained, unacknowledged=max(retained - acknowledged, 0))
