"""`SessionItemStore` on the single table: a session's head and items live in its address's partition.

Every change is one transaction: the address's head checked (live, this
token), the session's head put under the condition that it is still the
version read (absent, for the first add), and the items put or deleted. Of
two changes read from one version, one commits; the other reads the head
again and goes on from there, so no add is lost and no item popped twice.
A clear moves the head's `floor` to its last sequence, which hides every
item at or below it at once; they are deleted after the commit.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import ClientError

from cairn import jsontext
from cairn.agent_sessions.ports import ItemPage
from cairn.checkpoints.models import Owner
from cairn.dynamodb import agent_session_items, blobs, keys, table_ops
from cairn.dynamodb.agent_session_items import Head
from cairn.dynamodb.checkpoint_items import address_check
from cairn.dynamodb.items import cancellation_reasons, error_code, key
from cairn.errors import Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]
_T = TypeVar("_T")

# Each lost race is another writer's commit, so attempts are progress; the bound only ends a pathological run.
_ATTEMPTS = 64
_FAILED = "ConditionalCheckFailed"
# Where a commit's own actions start, after the address check and the head.
_FIRST_ACTION = 2


class _Moved(Exception):
    """The head is no longer the version read: read it again."""


class _Claimed(Exception):
    """The add's claim is already stored: this add committed before."""


class AgentSessionTable:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    # -- writes --------------------------------------------------------------

    def add(self, owner: Owner, session_id: str, items: Sequence[str], *, add_id: str | None, now: float) -> int:
        claims = [] if add_id is None else [agent_session_items.add_claim(self._table, owner, session_id, add_id)]

        def attempt(head: Head) -> int:
            new = head.added(len(items))
            puts = [
                put
                for offset, text in enumerate(items)
                for put in agent_session_items.item_puts(
                    self._table, owner, session_id, head.last_seq + 1 + offset, text, jsontext.sent_size(text)
                )
            ]
            try:
                self._commit(owner, session_id, head, new, [*claims, *puts], now=now, claimed=bool(claims))
            except _Claimed:
                return head.count
            return new.count

        return self._until_committed(owner.address_id, session_id, attempt)

    def pop(self, owner: Owner, session_id: str, *, now: float) -> str | None:
        def attempt(head: Head) -> str | None:
            if head.count == 0:
                return None
            newest = next(self._items(owner.address_id, session_id, head, before=None, page_size=1), None)
            if newest is None:
                return None
            text = self._text(newest)
            deletes = agent_session_items.item_deletes(self._table, newest)
            self._commit(owner, session_id, head, head.popped(), deletes, now=now)
            return text

        return self._until_committed(owner.address_id, session_id, attempt)

    def clear(self, owner: Owner, session_id: str, *, now: float) -> None:
        def attempt(head: Head) -> Head | None:
            if head.count == 0 and head.floor == head.last_seq:
                return None
            new = head.cleared()
            self._commit(owner, session_id, head, new, [], now=now)
            return new

        cleared = self._until_committed(owner.address_id, session_id, attempt)
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

    def _until_committed(self, address_id: str, session_id: str, attempt: Callable[[Head], _T]) -> _T:
        for tries in range(_ATTEMPTS):
            try:
                return attempt(self._head(address_id, session_id))
            except _Moved:
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2**tries)))
        raise Unavailable("The session is too busy right now; retry shortly.")

    def _commit(
        self,
        owner: Owner,
        session_id: str,
        seen: Head,
        new: Head,
        actions: list[Item],
        *,
        now: float,
        claimed: bool = False,
    ) -> None:
        """Commit `actions` with the address check and the head's move; `claimed`: the first is an add's claim."""
        transaction = [
            address_check(self._table, owner, now=now),
            agent_session_items.head_put(self._table, owner, session_id, seen, new),
            *actions,
        ]
        try:
            table_ops.transact_write(self._client, transaction)
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            reasons = cancellation_reasons(error)
            if reasons and reasons[0].get("Code") == _FAILED:
                raise Unauthorized() from error
            if claimed and len(reasons) > _FIRST_ACTION and reasons[_FIRST_ACTION].get("Code") == _FAILED:
                raise _Claimed() from error
            # The head moved, an item another pop took, or another transaction held one: read again.
            raise _Moved() from error

    # -- reads ---------------------------------------------------------------

    def page(self, address_id: str, session_id: str, *, limit: int, before: int | None, max_bytes: int) -> ItemPage:
        head = self._head(address_id, session_id)
        newest_first: list[str] = []
        budget = max_bytes
        oldest = None
        for item in self._items(address_id, session_id, head, before=before, page_size=limit):
            size = agent_session_items.size_of(item)
            if len(newest_first) == limit or (newest_first and size > budget):
                return ItemPage(list(reversed(newest_first)), oldest)
            newest_first.append(self._text(item))
            budget -= size
            oldest = int(item["seq"]["N"])
        return ItemPage(list(reversed(newest_first)), None)

    def _head(self, address_id: str, session_id: str) -> Head:
        item = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.agent_session_head_sk(session_id)),
            ConsistentRead=True,
        ).get("Item")
        return agent_session_items.head_from(item)

    def _items(self, address_id: str, session_id: str, head: Head, *, before: int | None, page_size: int) -> Any:
        """The live items below `before`, newest first, read `page_size` at a time (one more to know if any remain)."""
        newest = head.last_seq if before is None else min(head.last_seq, before - 1)
        if newest <= head.floor:
            return iter(())
        return table_ops.query_range(
            self._client,
            self._table,
            keys.address_pk(address_id),
            keys.agent_session_item_sk(session_id, head.floor + 1),
            keys.agent_session_item_sk(session_id, newest),
            ScanIndexForward=False,
            page_size=page_size + 1,
        )

    def _text(self, item: Item) -> str:
        data = blobs.read(self._client, self._table, item, legacy_prefix=keys.payload_chunk_prefix(item["sk"]["S"]))
        return (data or b"").decode("utf-8")
