"""`CairnSession`: the OpenAI Agents SDK's `Session` on an address's session routes.

Every method is one request (a long read, or an add longer than one
request holds, a few): an add commits whole and after every earlier add
(one of more rows than a DynamoDB transaction holds, or sent in parts, too:
the server writes it where no read looks before one commit makes it the
session's), a pop
takes an item no other process gets, and a read sees only committed adds,
so any number of processes, machines or Lambda invocations can share one
session. Items are the SDK's input items,
JSON objects stored and answered exactly.

It also offers the hooks through which the SDK's compaction
(`OpenAIResponsesCompactionSession`) replaces history in one commit rather
than clearing it and adding the summary: a snapshot of the newest items whose
suffix is replaced only while the session is as read, and a whole-history
replacement. Without them a process that stopped between the clear and the
add would leave the session empty, and an add another process made during
the compaction would be cleared away.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agents.items import TResponseInputItem
from agents.memory import await_session_mutation
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from cairn.client.address import Address
from cairn.client.http import HttpClient, json_body
from cairn.client.paths import segment
from cairn.errors import InvalidRequest, PayloadTooLarge, SessionConflict, StorageLimitExceeded

if TYPE_CHECKING:
    from agents.memory.session import _CompactionSnapshot

logger = logging.getLogger(__name__)
_Answer = TypeVar("_Answer")

# The most items one answer holds (the server's page), and so what one read asks for.
_PAGE_ITEMS = 1000
# What one request of an add holds (the server's `MAX_ITEMS_PER_ADD`, and below its `MAX_ADD_BYTES` of canonical
# JSON by a margin for how this client's encoding may differ): a longer `add_items` travels in parts.
_ITEMS_PER_ADD = 1000
_BYTES_PER_ADD = 3_400_000
# An add too large for one commit is refused while another such change of the session is being written (409
# `session_conflict`, reason `held`): it is sent again, after waits growing to this, until that one ends, or
# for as long as the server lets a stopped writer hold the session (five minutes) and a margin; then the
# refusal is raised.
_HELD_WAIT_SECONDS = (0.05, 2.0)
_HELD_WAIT_LIMIT_SECONDS = 330.0
# A snapshot spanning pages is read again when the session changed between them, this many times at most.
_SNAPSHOT_READS = 3
# Refusals that leave a replacement undone and the session as it was: the compaction is skipped, not failed.
_REPLACEMENT_REFUSED = (SessionConflict, InvalidRequest, PayloadTooLarge, StorageLimitExceeded)


class CairnSession(SessionABC):
    """A conversation kept in a Cairn address, under `session_id`.

    The address's read token owns it; it goes when the address is deleted or
    expires. The SDK's async methods run each HTTP call on a worker thread,
    through the address's client (timeouts, retries on 429 and 5xx).
    """

    def __init__(self, address: Address, session_id: str, *, session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.address = address
        self._http: HttpClient = address.http
        self._url = f"{address.address_url}/sessions/{segment(session_id, 'session id')}/items"
        self._token = address.read_token

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str, session_id: str, **kwargs: Any) -> CairnSession:
        """A session of the address known by id and read token."""
        return cls(Address.connect(base_url, address_id, read_token), session_id, **kwargs)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest `limit` items (every item when None), oldest first."""
        return await asyncio.to_thread(self._get_items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add the items after every item already there, all at once, whatever their number: more than one
        request holds (1,000 items, 3,500,000 bytes of JSON) go in parts, which the server makes the session's
        items together with the last."""
        if items:
            await _settled(self._add, list(items))

    def _add(self, items: list[TResponseInputItem]) -> None:
        parts = _parts(items)
        if len(parts) == 1:
            # One id for every attempt: a retry after a lost answer adds nothing twice.
            self._send_add({"items": items, "add_id": uuid.uuid4().hex})
            return
        try:
            self._add_in_parts(parts)
        except SessionConflict as conflict:
            if conflict.details.get("reason") != "parts_lost":
                raise
            # Its hold lapsed between two parts (a server or network slow for minutes) and another change let
            # its parts go: nothing of it was stored, so it is sent again whole, once, under an id of its own.
            self._add_in_parts(parts)

    def _add_in_parts(self, parts: list[list[TResponseInputItem]]) -> None:
        """One add of the parts, in order, under one id: every attempt of each part carries it."""
        add_id = uuid.uuid4().hex
        offset = 0
        for number, part in enumerate(parts, start=1):
            self._send_add({"items": part, "add_id": add_id, "offset": offset, "more": number < len(parts)})
            offset += len(part)

    def _send_add(self, body: dict[str, Any]) -> None:
        """Send the add, and again while another change too large for one commit holds the session: that one
        ends within moments, or lapses within the server's lease when its writer stopped."""
        wait, longest = _HELD_WAIT_SECONDS
        give_up = time.monotonic() + _HELD_WAIT_LIMIT_SECONDS
        while True:
            try:
                self._request("POST", "", body)
                return
            except SessionConflict as conflict:
                if conflict.details.get("reason") != "held" or time.monotonic() + wait > give_up:
                    raise
            time.sleep(wait)
            wait = min(wait * 2, longest)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; no other process gets the same one."""
        # One id for every attempt of this pop: a retry after a lost answer takes no second item.
        answer = await _settled(self._request, "POST", "/pop", None, {"pop_id": uuid.uuid4().hex})
        item: TResponseInputItem | None = answer["item"]
        return item

    async def clear_session(self) -> None:
        await _settled(self._request, "DELETE", "", None)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[TResponseInputItem], bool] | None = None
    ) -> _CompactionSnapshot | None:
        """The SDK's compaction hook: the newest `limit` items, and a `replace_suffix(start, items)` that puts
        `items` in place of those from `start` on, in one commit, only while the session is still as read
        (False, and nothing changed, otherwise).

        `prune_prefix` (the SDK's encrypting session asks it, for items past their time to live): the oldest
        items it holds true of go in the same commit (`_replace_newest`).
        None (the SDK then compacts by clearing and adding) for an SDK without the hook's snapshot type.
        """
        snapshot_type = _snapshot_type()
        if snapshot_type is None:
            return None
        read = await asyncio.to_thread(self._newest_as_of_one_version, limit)
        if read is None:
            return None
        items, complete, version = read

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            newest = len(items) - start
            if newest <= 0:
                return False
            read_before = items[:start] if complete else None
            try:
                await _settled(self._replace_newest, newest, output, version, prune_prefix, read_before)
            except _REPLACEMENT_REFUSED as refused:
                # The SDK then keeps the history as it is and goes on.
                logger.warning("Cairn kept session %r as it was, refusing its compaction: %s", self.session_id, refused)
                return False
            return True

        return snapshot_type(items, complete, replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """The SDK's hook for replacing the whole history (a manual compaction): one commit, so a process that
        stops midway leaves the old history or the new one. True once committed.

        A refusal (more items than a replacement holds, or another replacement of every item under way) is
        raised, never answered False: the SDK would then clear the session and add the items in several adds,
        which a process that stops midway, or another process's add, would cut short.
        """
        await _settled(self._replace, items, None, None)
        return True

    def _newest_as_of_one_version(self, limit: int | None) -> tuple[list[TResponseInputItem], bool, int] | None:
        """The newest `limit` items (None: every one), whether they are all the session holds, and the version
        they are of; None when the session kept changing between the pages of the read (or the server names no
        version)."""
        for _ in range(_SNAPSHOT_READS):
            items, complete, versions = self._read_newest(limit)
            if len(versions) == 1 and (version := versions.pop()) is not None:
                return items, complete, version
        return None

    def _replace_newest(
        self,
        newest: int,
        items: list[TResponseInputItem],
        version: int,
        prune_prefix: Callable[[TResponseInputItem], bool] | None,
        read_before: list[TResponseInputItem] | None,
    ) -> None:
        """Replace the newest `newest` items with `items` while the session is at `version`.

        With `prune_prefix`, the oldest items it holds true of go too, in the same commit: it then replaces
        every item by those between and `items`. `read_before`: every item before the newest ones, when the
        snapshot read them all (else they are read). Where that replacement is more than one holds, or needs
        more room than the address has, the newest items alone are replaced and the others stay, as the
        encrypting session passes them by.
        """
        if prune_prefix is not None:
            before = read_before if read_before is not None else self._every_item_before(newest, version)
            expired = _leading(before or [], prune_prefix)
            if before and expired:
                try:
                    self._replace([*before[expired:], *items], None, version)
                    return
                except (InvalidRequest, PayloadTooLarge, StorageLimitExceeded):
                    pass
        self._replace(items, newest, version)

    def _every_item_before(self, newest: int, version: int) -> list[TResponseInputItem] | None:
        """Every item but the newest `newest`, as of `version`; None when the session is no longer at it."""
        read = self._newest_as_of_one_version(None)
        if read is None or read[2] != version:
            return None
        every = read[0]
        return every[: len(every) - newest]

    def _replace(self, items: list[TResponseInputItem], newest: int | None, version: int | None) -> None:
        """Replace the newest `newest` items (None: all) with `items`, while at `version` if given."""
        # One id for every attempt: a retry after a lost answer finds the replacement made, not a moved session.
        body = {"items": list(items), "newest": newest, "version": version, "replace_id": uuid.uuid4().hex}
        self._request("POST", "/replace", body)

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        return self._read_newest(limit)[0]

    def _read_newest(self, limit: int | None) -> tuple[list[TResponseInputItem], bool, set[int | None]]:
        """Page back from the newest until `limit` items (or the oldest) are read: the items, whether they
        are all the session holds, and the versions of the session the pages were read at."""
        found: list[TResponseInputItem] = []
        before: int | None = None
        versions: set[int | None] = set()
        while limit is None or len(found) < limit:
            # The SDK asks for "everything" as a limit of 2**31 - 1; an answer holds at most a page.
            params: dict[str, Any] = {"limit": _PAGE_ITEMS if limit is None else min(limit - len(found), _PAGE_ITEMS)}
            if before is not None:
                params["before"] = before
            page = self._http.request("GET", self._url, token=self._token, params=params).json()
            found = page["items"] + found
            versions.add(page.get("version"))
            before = page["next"]
            if before is None:
                break
        return found, before is None, versions

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, params: dict[str, Any] | None = None
    ) -> Any:
        payload = None if body is None else json_body(body)
        return self._http.request(method, self._url + path, token=self._token, body=payload, params=params).json()


async def _settled(write: Callable[..., _Answer], *arguments: Any) -> _Answer:
    """`write(*arguments)` on a worker thread, where a cancelled caller sees its cancellation only once the
    write has settled: the thread cannot be stopped, and the SDK, cancelled during a write, settles its run
    by reading what the session holds, so the write must not still be on its way to land after that."""
    return await await_session_mutation(asyncio.to_thread(write, *arguments))


def _parts(items: list[TResponseInputItem]) -> list[list[TResponseInputItem]]:
    """The items in order, in as few requests as hold them; an item too large for any goes alone, for the
    server to refuse."""
    parts: list[list[TResponseInputItem]] = [[]]
    size = 0
    for item in items:
        item_size = len(json_body(item))
        if parts[-1] and (len(parts[-1]) == _ITEMS_PER_ADD or size + item_size > _BYTES_PER_ADD):
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += item_size
    return parts


def _leading(items: list[TResponseInputItem], holds: Callable[[TResponseInputItem], bool]) -> int:
    """How many of the first items `holds` is true of, up to the first it is not."""
    return next((index for index, item in enumerate(items) if not holds(item)), len(items))


def _snapshot_type() -> type[_CompactionSnapshot] | None:
    """The SDK's compaction snapshot type, where its version has one (its compaction calls the hooks then)."""
    try:
        from agents.memory.session import _CompactionSnapshot
    except ImportError:
        return None
    return _CompactionSnapshot
