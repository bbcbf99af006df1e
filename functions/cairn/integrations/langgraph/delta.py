"""What a LangGraph `DeltaChannel` is rebuilt from: the writes along a checkpoint's parent chain.

A `DeltaChannel` stores its value whole only every `snapshot_frequency`
updates. Between them LangGraph asks the saver for each channel's history
(`get_delta_channel_history`): the writes of the checkpoint's ancestors,
oldest first, back to the nearest one whose `channel_values` holds the
channel (its `seed`). LangGraph's default walk reads one ancestor per
request; the saver lists them a page at a time instead (`parent_chain`),
and `histories` gathers each channel's writes and seed from them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory, PendingWrite, get_checkpoint_id

# The first page of ancestors a walk lists, and how much larger each next one is: most walks end
# within a page, and a long one takes few requests.
FIRST_PAGE = 16
PAGE_GROWTH = 4


def histories(channels: Sequence[str], ancestors: Iterator[CheckpointTuple]) -> dict[str, DeltaChannelHistory]:
    """Each channel's writes along `ancestors` (nearest first), up to and with the first that holds its value.

    An ancestor's own writes count (they made its child); the walk reads no
    further ancestor once every channel has its seed.
    """
    waiting = set(channels)
    newest_first: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
    seeds: dict[str, Any] = {}
    while waiting and (ancestor := next(ancestors, None)) is not None:
        for write in reversed(ancestor.pending_writes or []):
            if write[1] in waiting:
                newest_first[write[1]].append(write)
        for channel in waiting & ancestor.checkpoint["channel_values"].keys():
            seeds[channel] = ancestor.checkpoint["channel_values"][channel]
        waiting -= seeds.keys()
    found: dict[str, DeltaChannelHistory] = {}
    for channel in channels:
        found[channel] = {"writes": newest_first[channel][::-1]}
        if channel in seeds:
            found[channel]["seed"] = seeds[channel]
    return found


# `(before, limit)`: the namespace's checkpoints with ids below `before`, newest first, at most `limit`.
Listing = Callable[[str | None, int], Iterable[CheckpointTuple]]


def parent_chain(start: CheckpointTuple, listing: Listing) -> Iterator[CheckpointTuple]:
    """`start`'s parent, its parent, and so on, from pages of its namespace listed newest first.

    A checkpoint listed that is not the next parent is on another branch and is passed over; a parent that
    is no longer there ends the chain, as it ends LangGraph's own walk.
    """
    wanted = _parent_id(start)
    before, limit = get_checkpoint_id(start.config), FIRST_PAGE
    while wanted is not None:
        listed = 0
        for found in listing(before, limit):
            listed += 1
            found_id = get_checkpoint_id(found.config) or ""
            before = found_id
            if found_id == wanted:
                yield found
                wanted = _parent_id(found)
                if wanted is None:
                    return
            elif found_id < wanted:
                return  # listed in id order: the parent would have come before this one
        if listed < limit:
            return  # the namespace has nothing older
        limit *= PAGE_GROWTH


def _parent_id(found: CheckpointTuple) -> str | None:
    return get_checkpoint_id(found.parent_config) if found.parent_config else None
