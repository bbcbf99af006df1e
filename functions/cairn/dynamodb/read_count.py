"""An owner's read admitted and counted in one write of the address head.

A poll needs two things before its query: that the read token opens a live
address, and one more use of the address's per-minute read rate. Both are
conditions of one `UpdateItem` on the head, which returns the head
(`ALL_NEW`), so no read precedes it. The head keeps the current window's
number (`read_window`) and its count (`read_hits`); an update cannot choose
between "count on" and "start a new window" by itself, so the writer
guesses which one applies from the window it last saw, and a wrong guess
fails its condition and comes back with the head as it is
(`ReturnValuesOnConditionCheckFailure=ALL_OLD`), which settles the next
attempt. A window is a minute, as in `cairn.dynamodb.ratelimit`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cairn.addresses.rate_windows import window_of
from cairn.dynamodb.address_items import DELETED, READ_TOKEN, head_opens
from cairn.dynamodb.items import get_int, n, s

WINDOW = "read_window"
HITS = "read_hits"

Item = dict[str, Any]


class Verdict(msgspec.Struct, frozen=True):
    """What a failed counted read's returned head says: refused, spent, or the window to count in next."""

    admitted: bool
    spent: bool
    window: int | None


def update(read_token_digest: str, *, limit: int, now: float, same_window: bool) -> dict[str, Any]:
    """`UpdateItem` parameters (key and table aside) counting one read if the digest opens the live head.

    `same_window`: the head's window is already this one (or a later one, by
    another clock), so the read counts on; otherwise the read starts the window.
    """
    names = {"#cred": READ_TOKEN, "#deleted": DELETED, "#window": WINDOW, "#hits": HITS}
    values = {":digest": s(read_token_digest), ":now": n(int(now)), ":w": n(window_of(now)), ":one": n(1)}
    admits = (
        "#cred = :digest AND attribute_not_exists(#deleted) AND (attribute_not_exists(expires_at) OR expires_at > :now)"
    )
    if same_window:
        expression = "ADD #hits :one"
        condition = f"{admits} AND #window >= :w AND #hits < :limit"
        values[":limit"] = n(limit)
    else:
        expression = "SET #window = :w, #hits = :one"
        condition = f"{admits} AND (attribute_not_exists(#window) OR #window < :w)"
    return {
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def new_head_attributes(now: float) -> Item:
    """A new head's window starts at its creation, so its first reads count on without a second try."""
    return {WINDOW: n(window_of(now)), HITS: n(0)}


def verdict(head: Item | None, read_token_digest: str, *, limit: int, now: float) -> Verdict:
    """Why a counted read failed, from the head as its condition saw it (None: no head)."""
    if not head_opens(head, read_token_digest, now=now) or head is None:
        return Verdict(admitted=False, spent=False, window=None)
    window = get_int(head, WINDOW, default=-1)
    if window >= window_of(now):
        return Verdict(admitted=True, spent=get_int(head, HITS) >= limit, window=window)
    return Verdict(admitted=True, spent=False, window=None if window < 0 else window)
