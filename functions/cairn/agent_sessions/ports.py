"""What the agent-session use case needs from storage; `cairn.dynamodb.agent_session_table` implements it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoints.models import Owner


@dataclass(frozen=True)
class ItemPage:
    """Items in the order they were added; `next` is the sequence to read before when older ones remain."""

    items: list[str]
    next: int | None


class SessionItemStore(Protocol):
    def add(self, owner: Owner, session_id: str, items: Sequence[str], *, add_id: str | None, now: float) -> int:
        """Append the items (canonical JSON texts) in order, all in one commit; the session's count after it.

        The first add creates the session; two first adds at once still make one.
        An add whose `add_id` was committed before adds nothing and answers the count now.
        """
        ...

    def page(self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int) -> ItemPage:
        """The newest `limit` items below sequence `before` (None: the newest of all), within `max_bytes`."""
        ...

    def pop(self, owner: Owner, session_id: str, *, now: float) -> str | None:
        """Remove and return the newest item, conditional on the session's head: no two callers get one item."""
        ...

    def clear(self, owner: Owner, session_id: str, *, now: float) -> None:
        """Empty the session in one commit; the items it held are removed after."""
        ...
