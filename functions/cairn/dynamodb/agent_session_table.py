"""`SessionItemStore` on the single table: a session's head and items live in its address's partition.

Every change is one transaction: the address's head checked (live, this
token), the session's head put under the condition that it is still the
version read (absent, for the first add), and the items put or deleted. Of
two changes read from one version, one commits; the other reads the head
again and goes on from there, so no add is lost and no item popped twice.
A clear moves the head's `floor` to its last sequence, which hides every
item at or below it at once; they are deleted after the commit. A
replacement of every item does the same and puts the new items above; one
of the newest items only deletes them in its commit.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cairn import jsontext
from cairn.agent_sessions.ports import ItemPage, Popped, Replaced
from cairn.checkpoints.models import Admission, Owner
from cairn.dynamodb import address_items, agent_session_items, blobs, checkpoint_items, keys, storage_usage, table_ops
from cairn.dynamodb.agent_session_items import Head
from cairn.dynamodb.items import get_int, key
from cairn.errors import IdempotencyKeyReused, InvalidRequest, SessionConflict, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]
_T = TypeVar("_T")
_S = TypeVar("_S")

# Each lost race is another writer's commit, so attempts are progress; the bound only ends a pathological run.
_ATTEMPTS = 64
# What every change commits besides its own actions: the address's check, the head and the count of stored bytes.
_OWN_ACTIONS = 3


class _Moved(Exception):
    """The head is no longer the version read: read it again."""


class _Stale(Exception):
    """The head is not at the version a replacement expects."""

    def __init__(self, head: Head) -> None:
        super().__init__("stale")
        self.head = head


class _Claimed(Exception):
    """The change's claim is already stored: it committed before. `item`: the claim as stored."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("claimed before")
        self.item = item


@dataclass(frozen=True)
class Growth:
    """What a commit that may grow a session adds beyond its head's count (rows counted for good), and the
    address's limit."""

    rows: int
    max_bytes: int


class AgentSessionTable:
    def __init__(self, client: DynamoDBClient, table: str, *, reclaim: storage_usage.Reclaim | None = None) -> None:
        """`reclaim`: what gives a full address room back (see `storage_usage.with_room`)."""
        self._client = client
        self._table = table
        self._reclaim = reclaim

    # -- writes --------------------------------------------------------------

    def add(
        self,
        admission: Admission,
        session_id: str,
        items: Sequence[str],
        *,
        add_id: str | None,
        now: float,
        max_bytes: int,
    ) -> int:
        owner, head = self._owner_and_head(admission, session_id)
        digest = agent_session_items.added_digest(items)
        claims = self._claims(owner, session_id, add_id, digest)
        sizes = [jsontext.sent_size(text) for text in items]
        size = sum(agent_session_items.item_bytes(each) for each in sizes)
        # The claim stays as long as the address: it counts for good.
        claimed_bytes = agent_session_items.ROW_OVERHEAD * len(claims)

        def attempt(head: Head) -> int:
            new = head.added(len(items), size)
            puts = self._item_puts(owner, session_id, head, items, sizes)
            try:
                self._commit(
                    owner,
                    session_id,
                    (head, new),
                    [*claims, *puts],
                    now=now,
                    claimed=bool(claims),
                    growth=Growth(claimed_bytes, max_bytes),
                )
            except _Claimed as claimed:
                if not agent_session_items.same_claim(claimed.item, digest):
                    raise IdempotencyKeyReused(
                        "This add_id was sent before with other items: send these under an add_id of their own.",
                        field="add_id",
                    ) from None
                return head.count
            return new.count

        return self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)

    def pop(self, admission: Admission, session_id: str, *, pop_id: str | None, now: float) -> Popped:
        def top() -> tuple[Head, Item | None]:
            head, live = self._newest_first(admission.address_id, session_id, before=None, wanted=1)
            return head, next(live, None)

        def attempt(seen: tuple[Head, Item | None]) -> Popped:
            head, newest = seen
            if newest is None:
                # No commit, so no address check: the caller checks the token. The session may be empty
                # because this very pop took its last item before its answer was lost.
                return Popped(self._popped_before(admission.address_id, session_id, pop_id), token_checked=False)
            text = self._text(newest)
            # The head carries its address's expiry; the commit's address check decides the token.
            owner = admission.unchecked_owner(head.expires_at)
            claims = (
                []
                if pop_id is None
                else agent_session_items.pop_claim_puts(self._table, owner, session_id, pop_id, text, now=now)
            )
            deletes = agent_session_items.item_deletes(self._table, newest)
            # A claim keeps the item a day for the pop's retries, and the head counts it until then.
            held_until = None if pop_id is None else int(now) + agent_session_items.POP_CLAIM_SECONDS
            new = head.popped(agent_session_items.counted_bytes(newest), held_until=held_until)
            try:
                self._commit(owner, session_id, (head, new), [*claims, *deletes], now=now, claimed=bool(claims))
            except _Claimed as claimed:
                earlier = (
                    self._text(claimed.item)
                    if claimed.item
                    else self._popped_before(admission.address_id, session_id, pop_id)
                )
                return Popped(earlier, token_checked=True)
            return Popped(text, token_checked=True)

        return self._until_committed(top(), top, attempt)

    def _popped_before(self, address_id: str, session_id: str, pop_id: str | None) -> str | None:
        """The item a pop under `pop_id` took, if it committed; None without an id."""
        if pop_id is None:
            return None
        item = self._row(address_id, keys.agent_session_pop_sk(session_id, pop_id))
        return None if item is None else self._text(item)

    def replace(
        self,
        admission: Admission,
        session_id: str,
        items: Sequence[str],
        *,
        newest: int | None,
        version: int | None,
        replace_id: str | None,
        now: float,
        max_bytes: int,
    ) -> Replaced:
        """Put `items` in place of the session's newest `newest` items (None: all of them), in one commit.

        With `version`, only while the session is still at that version (`SessionConflict` otherwise):
        the items replaced are then exactly the newest ones its caller read. Replacing every item moves
        the floor, as a clear does, whatever their number; replacing some of them while keeping older ones
        deletes those in the commit, so they must fit in it with the new items (`InvalidRequest` when not).
        A retry under a `replace_id` that committed writes nothing and answers the head now.
        """
        owner, head = self._owner_and_head(admission, session_id)
        digest = agent_session_items.replaced_digest(items, newest, version)
        claims = self._claims(owner, session_id, replace_id, digest)
        sizes = [jsontext.sent_size(text) for text in items]
        size = sum(agent_session_items.item_bytes(each) for each in sizes)

        def attempt(head: Head) -> tuple[Head, bool]:
            if version is not None and head.version != version:
                raise _Stale(head)
            removed = self._newest_rows(owner.address_id, session_id, head, newest)
            new = head.replaced(
                None if removed is None else len(removed),
                sum(agent_session_items.counted_bytes(row) for row in removed or ()),
                len(items),
                size,
            )
            deletes = [each for row in removed or () for each in agent_session_items.item_deletes(self._table, row)]
            actions = [*claims, *deletes, *self._item_puts(owner, session_id, head, items, sizes)]
            if len(actions) + _OWN_ACTIONS > table_ops.MAX_TRANSACTION_ACTIONS:
                if removed is None:
                    raise InvalidRequest(
                        "These items, with their pieces, take more than one commit: send fewer or smaller ones.",
                        field="items",
                    )
                raise InvalidRequest(
                    f"Replacing the newest {newest} items while keeping older ones takes more than one commit "
                    "with these items: replace fewer, or every item.",
                    field="newest",
                )
            try:
                self._commit(
                    owner,
                    session_id,
                    (head, new),
                    actions,
                    now=now,
                    claimed=bool(claims),
                    growth=Growth(agent_session_items.ROW_OVERHEAD * len(claims), max_bytes),
                )
            except _Claimed as claimed:
                return self._replaced_before(claimed.item, digest, owner.address_id, session_id), True
            return new, removed is None

        try:
            new, swept = self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)
        except _Stale as stale:
            claim = (
                None
                if replace_id is None
                else self._row(owner.address_id, keys.agent_session_add_sk(session_id, replace_id))
            )
            if claim is None:
                raise SessionConflict(
                    "The session changed since it was read: read it again.",
                    reason="moved",
                    current_version=stale.head.version,
                ) from None
            new, swept = self._replaced_before(claim, digest, owner.address_id, session_id), True
        if swept:
            self._delete_through(owner.address_id, session_id, new.floor)
        return Replaced(new.count, new.version)

    def _newest_rows(self, address_id: str, session_id: str, head: Head, newest: int | None) -> list[Item] | None:
        """The stored rows of the session's newest `newest` items as of `head`; None when that is every item."""
        if newest is None or newest >= head.count:
            return None
        current, live = self._newest_first(address_id, session_id, before=None, wanted=newest)
        rows = list(itertools.islice(live, newest))
        if current.version != head.version or any(get_int(row, "seq") > head.last_seq for row in rows):
            # Another change came in since `head` was read (a query may meet part of a transaction): its rows
            # are not the ones to replace, and its items may sit where the new ones would go.
            raise _Moved()
        return rows

    def _replaced_before(self, claim: Item | None, digest: str, address_id: str, session_id: str) -> Head:
        """The head now, for a retry of a replacement that committed under its id (found as `claim`)."""
        if not agent_session_items.same_claim(claim, digest):
            raise IdempotencyKeyReused(
                "This replace_id was sent before with another replacement: send this one under an id of its own.",
                field="replace_id",
            )
        return self._head(address_id, session_id)

    def clear(self, owner: Owner, session_id: str, *, now: float) -> None:
        def attempt(head: Head) -> Head | None:
            if head.count == 0 and head.floor == head.last_seq:
                return None
            new = head.cleared()
            self._commit(owner, session_id, (head, new), [], now=now)
            return new

        head = self._head(owner.address_id, session_id)
        cleared = self._until_committed(head, lambda: self._head(owner.address_id, session_id), attempt)
        if cleared is not None:
            self._delete_through(owner.address_id, session_id, cleared.floor)

    def _delete_through(self, address_id: str, session_id: str, floor: int) -> None:
        """Remove the items (and their pieces) a clear hid: every sequence up to `floor`."""
        pk = keys.address_pk(address_id)
        first, last = keys.agent_session_item_sk(session_id, 0), keys.agent_session_item_sk(session_id, floor)
        for lower, upper in (
            (first, last),
            (keys.payload_chunk_prefix(first), keys.upper_bound(keys.payload_chunk_prefix(last))),
        ):
            table_ops.delete_partition(
                self._client,
                self._table,
                pk,
                lower,
                upper,
                exhausted=lambda: Unavailable("Clearing is throttled; retry shortly."),
            )

    def _claims(self, owner: Owner, session_id: str, client_id: str | None, digest: str) -> list[Item]:
        """The claim of a change its client named (`add_id`, `replace_id`), or none."""
        if client_id is None:
            return []
        return [agent_session_items.add_claim(self._table, owner, session_id, client_id, digest)]

    def _item_puts(
        self, owner: Owner, session_id: str, head: Head, items: Sequence[str], sizes: Sequence[int]
    ) -> list[Item]:
        """The puts of `items` (and their pieces), numbered right after the head's last sequence."""
        first = head.last_seq + 1
        return [
            put
            for offset, (text, sent) in enumerate(zip(items, sizes, strict=True))
            for put in agent_session_items.item_puts(self._table, owner, session_id, first + offset, text, sent)
        ]

    def _until_committed(self, first: _S, read: Callable[[], _S], attempt: Callable[[_S], _T]) -> _T:
        """`attempt` on what was read, and on a fresh `read` each time another writer moved the head first."""
        seen = first
        for tries in range(_ATTEMPTS):
            try:
                return attempt(seen)
            except _Moved:
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2**tries)))
                seen = read()
        raise Unavailable("The session is too busy right now; retry shortly.")

    def _commit(
        self,
        owner: Owner,
        session_id: str,
        move: tuple[Head, Head],
        actions: list[Item],
        *,
        now: float,
        claimed: bool = False,
        growth: Growth | None = None,
    ) -> None:
        """Commit `actions` with the address check, the head's move from what was read to its new state, and
        the address's count of stored bytes moved by what the session's rows count more or less.

        `claimed`: the first action is an add's or a pop's claim, whose failed condition is `_Claimed`.
        `growth`: for a commit that may grow the session, what it adds beyond the head's count and the limit
        the address's count must stay within (`StorageLimitExceeded` when it would not); without it, a
        commit only shrinks.
        """
        seen, new = move
        new = new.lapsed(now)
        grown = new.counted(session_id) - seen.counted(session_id) + (growth.rows if growth else 0)
        head = agent_session_items.head_put(self._table, owner, session_id, seen, new)
        meter = None
        if grown < 0:
            meter = storage_usage.release(self._table, owner.address_id, -grown)
        elif growth is not None:
            # A pop or a clear never grows (a pop's claim holds what its item gave back): only these are charged.
            expiry = checkpoint_items.expiry(owner)
            meter = storage_usage.charge(
                self._table, owner.address_id, grown, max_bytes=growth.max_bytes, expiry=expiry
            )
        counted = [meter] if meter else []

        def transact() -> None:
            try:
                table_ops.transact_owned(
                    self._client,
                    checkpoint_items.address_check(self._table, owner, now=now),
                    [head, *actions, *counted],
                )
            except table_ops.Cancelled as cancelled:
                reason = cancelled.failed(1) if claimed else None
                if reason is not None:
                    raise _Claimed(reason.get("Item")) from cancelled
                refused = cancelled.failed(1 + len(actions)) if counted else None
                if growth is not None and grown > 0 and refused is not None and cancelled.failed(0) is None:
                    raise storage_usage.refusal(refused, grown, max_bytes=growth.max_bytes) from cancelled
                # The head moved, an item another pop took, or another transaction held one: read again.
                raise _Moved() from cancelled

        storage_usage.with_room(self._reclaim if growth and grown > 0 else None, owner, now, transact)

    # -- reads ---------------------------------------------------------------

    def page(self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int) -> ItemPage:
        newest_first: list[str] = []
        budget = max_bytes
        oldest = None
        # One item beyond the page tells whether another page follows.
        head, live = self._newest_first(address_id, session_id, before=before, wanted=limit + 1)
        for item in live:
            size = agent_session_items.size_of(item)
            if len(newest_first) == limit or (newest_first and size > budget):
                return ItemPage(list(reversed(newest_first)), oldest, head.version)
            newest_first.append(self._text(item))
            budget -= size
            oldest = int(item["seq"]["N"])
        return ItemPage(list(reversed(newest_first)), None, head.version)

    def _owner_and_head(self, admission: Admission, session_id: str) -> tuple[Owner, Head]:
        """The owner the admission acts for (`Unauthorized` if none) and the session's head, in one read."""
        pk = keys.address_pk(admission.address_id)
        head_sk = keys.agent_session_head_sk(session_id)
        found = {
            item["sk"]["S"]: item
            for item in table_ops.batch_get(
                self._client,
                self._table,
                [key(pk, keys.META), key(pk, head_sk)],
                exhausted=lambda: Unavailable("The session is too busy right now; retry shortly."),
            )
        }
        address = found.get(keys.META)
        owner = admission.owner(address_items.record_from_item(address) if address else None)
        return owner, agent_session_items.head_from(found.get(head_sk))

    def _head(self, address_id: str, session_id: str) -> Head:
        return agent_session_items.head_from(self._row(address_id, keys.agent_session_head_sk(session_id)))

    def _row(self, address_id: str, sk: str) -> Item | None:
        """One row of the address's partition, read consistently."""
        found: Item | None = self._client.get_item(
            TableName=self._table, Key=key(keys.address_pk(address_id), sk), ConsistentRead=True
        ).get("Item")
        return found

    def _newest_first(
        self, address_id: str, session_id: str, *, before: int | None, wanted: int
    ) -> tuple[Head, Iterator[Item]]:
        """The session's head, and its live items below sequence `before`, newest first, `wanted` a query.

        With no `before`, one query reads both: the head sorts right above the items. Items a clear hid
        (at or below the head's `floor`) end the list; they are only waiting to be deleted.
        """
        pk = keys.address_pk(address_id)
        lowest = keys.agent_session_item_sk(session_id, 1)
        if before is None:
            head_sk = keys.agent_session_head_sk(session_id)
            rows = table_ops.query_range(
                self._client, self._table, pk, lowest, head_sk, ScanIndexForward=False, page_size=wanted + 1
            )
            first = next(rows, None)
            if first is None or first["sk"]["S"] != head_sk:
                return Head(), iter(())
            head = agent_session_items.head_from(first)
        else:
            head = self._head(address_id, session_id)
            if before <= head.floor + 1:
                return head, iter(())
            upper = keys.agent_session_item_sk(session_id, before - 1)
            rows = table_ops.query_range(
                self._client, self._table, pk, lowest, upper, ScanIndexForward=False, page_size=wanted
            )
        if head.count == 0:
            return head, iter(())
        return head, itertools.takewhile(lambda item: get_int(item, "seq") > head.floor, rows)

    def _text(self, item: Item) -> str:
        data = blobs.read(self._client, self._table, item, legacy_prefix=keys.payload_chunk_prefix(item["sk"]["S"]))
        return (data or b"").decode("utf-8")
