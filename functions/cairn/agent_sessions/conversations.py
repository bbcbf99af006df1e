"""Agent sessions of an address (its read token): add items, read the newest, pop one, clear.

A session is an ordered list of conversation items (JSON objects, as the
OpenAI Agents SDK makes them) under an id the agent chooses. Every change
is one commit conditional on the session's head, so processes sharing a
session never lose an add, never pop one item twice, and never see half of
an add. Items travel and are stored as canonical JSON text. What a session
stores counts against its address's storage limit with its files: an add
past it is refused whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn import jsontext
from cairn.addresses.ports import AddressStore
from cairn.agent_sessions.ports import AddPart, Replaced, SessionItemStore
from cairn.checkpoints.models import Admission, Owner, owner_of
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge

# A DynamoDB transaction holds 100 actions and 4 MB: the address check, the head, each item and the pieces
# of the large ones. A change with more rows is staged (written ahead where no read looks, then made the
# session's items by one commit), so a reader still sees all of it or none. An add takes as many items as
# a turn of many tool calls makes, and as one page of a read answers; the OpenAI Agents SDK's compaction
# sends every user message and a summary, which a replacement of every item takes as many of. Replacing
# only the newest items while older ones stay is one commit.
MAX_PAGE_ITEMS = 1000
MAX_ITEMS_PER_ADD = MAX_PAGE_ITEMS
MAX_ITEMS_PER_REPLACE = MAX_PAGE_ITEMS
MAX_ADD_BYTES = 3_500_000
# What one answer carries (its JSON as Lambda sends it), far below Lambda's 6 MB; one item always fits.
ANSWER_BUDGET = 4_000_000
# The largest sequence an item may have (12 digits, as keys spell it).
MAX_SEQUENCE = 999_999_999_999
SESSION_ID = re.compile(r"[A-Za-z0-9._:@~+=-]{1,256}")


class AgentSessions:
    def __init__(self, addresses: AddressStore, store: SessionItemStore, clock: Clock, *, max_bytes: int) -> None:
        self._addresses = addresses
        self._store = store
        self._clock = clock
        self._max_bytes = max_bytes

    def _owner(self, address_id: str, read_token: str | None) -> Owner:
        return owner_of(self._addresses, address_id, read_token, now=self._clock())

    def _admission(self, address_id: str, read_token: str | None) -> Admission:
        """For the changes: the store reads the address's head with the session's rows, in one call."""
        return Admission.of(address_id, read_token, now=self._clock())

    def add(
        self,
        address_id: str,
        read_token: str | None,
        session_id: str,
        items: Sequence[dict[str, Any]],
        *,
        add_id: str | None = None,
        part: AddPart | None = None,
    ) -> int:
        """Append `items` in order, all or none; the session's item count after them.

        `add_id` makes a retry safe: an add sent again under it after it committed adds nothing.
        `part`: the items are a part of an add larger than one request holds, sent in parts under one
        `add_id`; nothing of it is seen until its last part commits every part's items at once.
        """
        _check_session_id(session_id)
        if not 1 <= len(items) <= MAX_ITEMS_PER_ADD:
            raise InvalidRequest(f"Add 1 to {MAX_ITEMS_PER_ADD} items at once.", field="items")
        if part is not None and not (part.offset or part.more):
            part = None  # the whole add in one request
        if part is not None and add_id is None:
            raise InvalidRequest("An add sent in parts needs an add_id, the same in each part.", field="add_id")
        texts = _stored_texts(items)
        admission = self._admission(address_id, read_token)
        return self._store.add(
            admission, session_id, texts, add_id=add_id, now=self._clock(), max_bytes=self._max_bytes, part=part
        )

    def replace(
        self,
        address_id: str,
        read_token: str | None,
        session_id: str,
        items: Sequence[dict[str, Any]],
        *,
        newest: int | None = None,
        version: int | None = None,
        replace_id: str | None = None,
    ) -> Replaced:
        """Put `items` (up to `MAX_ITEMS_PER_REPLACE`) in place of the newest `newest` items (None: all):
        a reader sees the items before or after, never a session between them.

        `version`: only while the session is at the version its caller read (`SessionConflict` otherwise),
        so that what is replaced is what was read. `replace_id` makes a retry safe, as `add_id` does.
        """
        _check_session_id(session_id)
        if len(items) > MAX_ITEMS_PER_REPLACE:
            raise InvalidRequest(f"Replace with at most {MAX_ITEMS_PER_REPLACE} items at once.", field="items")
        if newest is not None and newest < 1:
            raise InvalidRequest("Replace at least the newest item, or every item.", field="newest")
        texts = _stored_texts(items)
        admission = self._admission(address_id, read_token)
        return self._store.replace(
            admission,
            session_id,
            texts,
            newest=newest,
            version=version,
            replace_id=replace_id,
            now=self._clock(),
            max_bytes=self._max_bytes,
        )

    def items(
        self, address_id: str, read_token: str | None, session_id: str, *, limit: int | None, before: int | None
    ) -> Items:
        """The newest `limit` items (below sequence `before`), oldest first, where older ones resume, and the
        session's version as read."""
        _check_session_id(session_id)
        self._owner(address_id, read_token)
        wanted = MAX_PAGE_ITEMS if limit is None else min(limit, MAX_PAGE_ITEMS)
        # A limit of 0 reads no item, only the version.
        page = self._store.page(address_id, session_id, limit=wanted, before=before, max_bytes=ANSWER_BUDGET)
        return Items([json.loads(text) for text in page.items], page.next, page.version)

    def pop(
        self, address_id: str, read_token: str | None, session_id: str, *, pop_id: str | None = None
    ) -> dict[str, Any] | None:
        """Remove and return the newest item; None when the session is empty.

        `pop_id` makes a retry safe: a pop sent again under it after it committed takes nothing more and
        answers the item it took.
        """
        _check_session_id(session_id)
        admission = self._admission(address_id, read_token)
        popped = self._store.pop(admission, session_id, pop_id=pop_id, now=self._clock())
        if not popped.token_checked:
            self._owner(address_id, read_token)  # no commit ran, so none checked the token
        return None if popped.text is None else dict(json.loads(popped.text))

    def clear(self, address_id: str, read_token: str | None, session_id: str) -> None:
        _check_session_id(session_id)
        owner = self._owner(address_id, read_token)
        self._store.clear(owner, session_id, now=self._clock())


@dataclass(frozen=True)
class Items:
    """A page of a session's items, oldest first; `next`: the `before` of the older ones, if any remain;
    `version`: the session's when read (0: no session)."""

    items: list[dict[str, Any]]
    next: int | None
    version: int


def _stored_texts(items: Sequence[dict[str, Any]]) -> list[str]:
    """The items as stored (canonical JSON), once they are known to fit one commit and one answer each."""
    texts = [jsontext.canonical(item) for item in items]
    if sum(len(text.encode()) for text in texts) > MAX_ADD_BYTES:
        raise PayloadTooLarge(f"One change holds at most {MAX_ADD_BYTES} bytes of items.", max_bytes=MAX_ADD_BYTES)
    if any(jsontext.sent_size(text) > ANSWER_BUDGET for text in texts):
        raise PayloadTooLarge("An item is too large to be answered again.", max_bytes=ANSWER_BUDGET)
    return texts


def _check_session_id(session_id: str) -> None:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidRequest("A session id is 1 to 256 letters, digits or . _ : @ ~ + = -.", field="session_id")
