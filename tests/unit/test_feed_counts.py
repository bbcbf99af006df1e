"""A feed's counters on its head stay a bounded share of the head's item, however long the feed runs."""

from __future__ import annotations

import pytest

from cairn.dynamodb import feed_counts
from cairn.dynamodb.items import get_int
from cairn.settings import MAX_EVENTS_LIMIT, InvalidSetting, Settings

DYNAMODB_ITEM_BYTES = 400 * 1024
EXPIRY = 1_798_915_786  # ten digits, as every expiry for decades


def _number_bytes(value: int) -> int:
    # DynamoDB: a number takes about one byte per two significant digits, plus one.
    return (len(str(abs(value))) + 1) // 2 + 1


def _apply(head: dict[str, int], update: feed_counts.HeadUpdate) -> None:
    for clause in update.adds:
        name, value = clause.split()
        head[update.names[name]] = head.get(update.names[name], 0) + get_int(update.values, value)
    for clause in update.sets:
        name, value = (part.strip() for part in clause.split("="))
        head[update.names[name]] = get_int(update.values, value)
    for name in update.removes:
        head.pop(update.names[name], None)


def _counters_after(appends: int, *, batch: int, max_events: int) -> dict[str, int]:
    """The counters a head holds after `appends` batches, every event of them acknowledged once."""
    head: dict[str, int] = {}
    for number in range(appends):
        last = number * batch
        _apply(head, feed_counts.on_append(last, batch, EXPIRY, max_events))
        for sequence in range(last + 1, last + batch + 1):
            if sequence % feed_counts.BLOCK == 0 or sequence == last + batch:
                _apply(head, feed_counts.on_acknowledge(sequence))
    return head


def test_a_full_feed_at_the_largest_setting_keeps_its_counters_to_a_quarter_of_an_item() -> None:
    batch = 25
    # Twice the feed's length: old blocks have fallen behind and been removed by then.
    head = _counters_after(2 * MAX_EVENTS_LIMIT // batch, batch=batch, max_events=MAX_EVENTS_LIMIT)
    blocks = {name.removeprefix("fn_") for name in head if name.startswith("fn_")}
    assert len(blocks) <= MAX_EVENTS_LIMIT // feed_counts.BLOCK + 2
    size = sum(len(name) + _number_bytes(value) for name, value in head.items())
    assert size <= DYNAMODB_ITEM_BYTES // 4


def test_counters_stop_growing_once_the_feed_is_full() -> None:
    full = _counters_after(40, batch=25, max_events=500)
    longer = _counters_after(400, batch=25, max_events=500)
    assert len(longer) == len(full)


def test_a_feed_larger_than_the_limit_is_refused_as_a_setting() -> None:
    assert Settings(max_events=MAX_EVENTS_LIMIT).max_events == MAX_EVENTS_LIMIT
    with pytest.raises(InvalidSetting, match="max_events"):
        Settings(max_events=MAX_EVENTS_LIMIT + 1)
