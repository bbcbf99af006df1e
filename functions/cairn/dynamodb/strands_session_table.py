"""`StrandsSessionStore` on the single table: a Strands session lives in its address's partition.

Every write is one transaction: the address's head checked (live, this
token), then the agent's (or multi-agent's) head updated under the claim
(still the version the run read, no other run's live hold) with the message
it adds or replaces. The head's failed condition returns it (`ALL_OLD`), and
the refusal is decided on that: another version is `moved`, another live
holder `held`. A message is read by index with one range query, never by
reading the session.

The same transaction moves the address's count of stored bytes
(`storage_usage`) by what the write adds: a new row's bytes, or a
replacement's bytes less those it replaces, read beforehand from the head
at the claimed version (the commit's condition that the head is still at
that version makes the read exact). A write past the limit changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from botocore.exceptions import ClientError

from cairn.agent_sessions.ports import Claim, MessagePage, StoredRecord
from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys, storage_usage, strands_session_items, table_ops
from cairn.dynamodb.checkpoint_items import address_check, expiry
from cairn.dynamodb.items import error_code, get_int, get_s, key
from cairn.errors import NotFound, SessionConflict, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]
_T = TypeVar("_T")

# A transaction conflict means another write was in flight on the same items: sending it again lets the
# conditions decide. The bound ends a pathological run.
_ATTEMPTS = 10


class StrandsSessionTable:
    def __init__(
        self, client: DynamoDBClient, table: str, *, max_bytes: int, reclaim: storage_usage.Reclaim | None = None
    ) -> None:
        """`max_bytes`: what an address may store in all (files and sessions with these).

        `reclaim`: what gives a full address room back (see `storage_usage.with_room`).
        """
        self._client = client
        self._table = table
        self._max_bytes = max_bytes
        self._reclaim = reclaim

    # -- writes --------------------------------------------------------------

    def create_session(self, owner: Owner, session_id: str, text: str, *, now: float) -> None:
        put = strands_session_items.session_put(self._table, owner, session_id, text)
        growth = strands_session_items.row_bytes(text, session_id)
        self._commit(owner, [put], now=now, refused=lambda _: _exists("session"), growth=growth)

    def create_record(self, owner: Owner, session_id: str, kind: str, record_id: str, text: str, *, now: float) -> None:
        puts = strands_session_items.record_puts(self._table, owner, session_id, kind, record_id, text)
        refused = lambda _: _exists("agent" if kind == "A" else "multi-agent")  # noqa: E731
        self._commit(owner, puts, now=now, refused=refused, growth=strands_session_items.row_bytes(text, record_id))

    def update_record(
        self, owner: Owner, session_id: str, kind: str, record_id: str, text: str, claim: Claim, *, now: float
    ) -> int:
        same = lambda old: self._text(old) == text  # noqa: E731
        refused = lambda old: _refusal(old, claim, now=now, written=same)  # noqa: E731
        current = self._claimed_head(owner.address_id, session_id, kind, record_id, claim, refused)
        if current is None:
            return claim.version + 1
        state = strands_session_items.state_writes(self._table, owner, session_id, kind, record_id, text)
        head = strands_session_items.head_update(
            self._table, owner, session_id, kind, record_id, claim, now=now, state=state
        )
        # The pieces the state held beyond the new one's go with the same commit: the head read was at the
        # claimed version, and the commit holds only while it still is.
        stale = strands_session_items.stale_pieces(self._table, current, len(state.puts))
        growth = len(text.encode()) - strands_session_items.state_bytes(current)
        self._commit(owner, [head, *state.puts, *stale], now=now, refused=refused, growth=growth)
        return claim.version + 1

    def create_message(
        self, owner: Owner, session_id: str, agent_id: str, message_id: int, text: str, claim: Claim, *, now: float
    ) -> int:
        head, puts = self._message_writes(owner, session_id, agent_id, message_id, text, claim, "next", now=now)
        same = self._holds(owner.address_id, session_id, agent_id, message_id, text)
        refused = lambda old: _refusal(old, claim, now=now, written=same, index=message_id)  # noqa: E731
        # The next index holds no message yet (messages are never removed): the write adds all of it.
        growth = strands_session_items.message_bytes(text)
        self._commit(owner, [head, *puts], now=now, refused=refused, growth=growth)
        return claim.version + 1

    def update_message(
        self, owner: Owner, session_id: str, agent_id: str, message_id: int, text: str, claim: Claim, *, now: float
    ) -> int:
        same = self._holds(owner.address_id, session_id, agent_id, message_id, text)
        refused = lambda old: _refusal(old, claim, now=now, written=same, index=message_id, replacing=True)  # noqa: E731
        if self._claimed_head(owner.address_id, session_id, "A", agent_id, claim, refused) is None:
            return claim.version + 1
        head, puts = self._message_writes(owner, session_id, agent_id, message_id, text, claim, "stored", now=now)
        # The pieces the message held beyond the new text's go with the same commit. It is read after the
        # head was found at the claimed version, and the commit holds only while the head still is: so it
        # is that version's message, with no other write between.
        stored = self._message(owner.address_id, session_id, agent_id, message_id)
        stale = (
            []
            if stored is None
            else strands_session_items.stale_pieces(self._table, stored, strands_session_items.pieces_in(puts))
        )
        freed = 0 if stored is None else strands_session_items.stored_message_bytes(stored)
        growth = strands_session_items.message_bytes(text) - freed
        self._commit(owner, [head, *puts, *stale], now=now, refused=refused, growth=growth)
        return claim.version + 1

    def _claimed_head(
        self,
        address_id: str,
        session_id: str,
        kind: str,
        record_id: str,
        claim: Claim,
        refused: Callable[[Item | None], Exception | None],
    ) -> Item | None:
        """The head as read, when it is at the claimed version: what a replacement's growth is reckoned from.

        Otherwise the commit could not hold: the refusal as `_commit` words it is raised, or None answered
        when the head shows this very write committed already (a retry after a lost answer).
        """
        sk = keys.strands_record_sk(session_id, kind, record_id)
        # Its key, version and counts only: a state may be hundreds of kilobytes.
        head = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), sk),
            ConsistentRead=True,
            ProjectionExpression="#pk, #sk, #version, #bytes, #pieces",
            ExpressionAttributeNames={
                "#pk": "pk",
                "#sk": "sk",
                "#version": strands_session_items.VERSION,
                "#bytes": strands_session_items.DATA_BYTES,
                "#pieces": blobs.PIECES,
            },
        ).get("Item")
        if head is not None and get_int(head, strands_session_items.VERSION) == claim.version:
            return head
        # The refusal is worded from the whole head, as a failed commit returns it.
        refusal = refused(self._get(address_id, sk))
        if refusal is None:
            return None
        raise refusal

    def release(self, owner: Owner, session_id: str, agent_id: str, writer: str, *, now: float) -> bool:
        try:
            self._client.update_item(
                **strands_session_items.release_update(self._table, owner, session_id, agent_id, writer)
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _message_writes(
        self,
        owner: Owner,
        session_id: str,
        agent_id: str,
        message_id: int,
        text: str,
        claim: Claim,
        condition: Literal["next", "stored"],
        *,
        now: float,
    ) -> tuple[Item, list[Item]]:
        """The agent head's move under `claim` (the message the next one, or one stored), and the message's puts."""
        head = strands_session_items.head_update(
            self._table,
            owner,
            session_id,
            "A",
            agent_id,
            claim,
            now=now,
            message_condition=condition,
            message_id=message_id,
        )
        puts = strands_session_items.message_puts(
            self._table, owner, session_id, agent_id, message_id, text, version=claim.version + 1
        )
        return head, puts

    def _commit(
        self,
        owner: Owner,
        actions: list[Item],
        *,
        now: float,
        refused: Callable[[Item | None], Exception | None],
        growth: int,
    ) -> None:
        """Commit `actions` after the address check, with the address's count moved by `growth` bytes.

        `refused` words the first action's failed condition from the item it returned, or answers None when
        that item shows this very write committed already (a retry after a lost answer). A growth past the
        address's limit is `StorageLimitExceeded`.
        """
        check = address_check(self._table, owner, now=now)
        meter = storage_usage.charge(
            self._table, owner.address_id, growth, max_bytes=self._max_bytes, expiry=expiry(owner)
        )
        counted = [*actions, *([meter] if meter else [])]

        def transact() -> None:
            for attempt in range(_ATTEMPTS):
                try:
                    table_ops.transact_owned(self._client, check, counted)
                    return
                except table_ops.Cancelled as cancelled:
                    failed = cancelled.failed(0)
                    if failed is not None:
                        refusal = refused(failed.get("Item"))
                        if refusal is None:
                            return
                        raise refusal from cancelled
                    over = cancelled.failed(len(actions)) if meter else None
                    if over is not None:
                        raise storage_usage.refusal(over, growth, max_bytes=self._max_bytes) from cancelled
                table_ops.pause_after_conflict(attempt)
            raise Unavailable("The session is too busy right now; retry shortly.")

        storage_usage.with_room(self._reclaim, owner, now, transact)

    # -- reads ---------------------------------------------------------------

    def read_session(self, address_id: str, session_id: str) -> str | None:
        item = self._get(address_id, keys.strands_session_sk(session_id))
        return None if item is None else self._text(item)

    def read_record(self, address_id: str, session_id: str, kind: str, record_id: str) -> StoredRecord | None:
        """The head with its state, as one write left them (`_settled`)."""
        item = self._get(address_id, keys.strands_record_sk(session_id, kind, record_id))
        if item is None:
            return None
        text, item = self._settled(item)
        return strands_session_items.record_from(item, text)

    def messages(
        self, address_id: str, session_id: str, agent_id: str, *, offset: int, limit: int, max_bytes: int
    ) -> MessagePage:
        texts: list[str] = []
        budget = max_bytes
        found = table_ops.query_range(
            self._client,
            self._table,
            keys.address_pk(address_id),
            keys.strands_message_sk(session_id, agent_id, offset),
            keys.strands_message_sk(session_id, agent_id, 10**keys.SEQ_WIDTH - 1),
            page_size=limit + 1,
        )
        for item in found:
            size = strands_session_items.size_of(item)
            if len(texts) == limit or (texts and size > budget):
                return MessagePage(texts, get_int(item, "message_id"))
            texts.append(self._settled(item)[0])
            budget -= size
        return MessagePage(texts, None)

    def _holds(
        self, address_id: str, session_id: str, agent_id: str, message_id: int, text: str
    ) -> Callable[[Item], bool]:
        """Whether message `message_id` is stored as `text`, asked once a refusal needs it."""

        def holds(_: Item) -> bool:
            stored = self._message(address_id, session_id, agent_id, message_id)
            return stored is not None and self._text(stored) == text

        return holds

    def _message(self, address_id: str, session_id: str, agent_id: str, message_id: int) -> Item | None:
        return self._get(address_id, keys.strands_message_sk(session_id, agent_id, message_id))

    def _get(self, address_id: str, sk: str) -> Item | None:
        return self._item(keys.address_pk(address_id), sk)

    def _item(self, pk: str, sk: str) -> Item | None:
        return self._client.get_item(TableName=self._table, Key=key(pk, sk), ConsistentRead=True).get("Item")

    def _settled(self, item: Item) -> tuple[str, Item]:
        """The text of a message or a head's state as one write left it, with the item it is of. One in pieces is
        read after its item, and a write may replace them between the two reads: it stands only if the item is
        still the one read (every write changes it: a head's version, a message's `written_at`), else the item
        and its pieces are read again."""
        for attempt in range(_ATTEMPTS):
            text = self._text(item)
            if blobs.PIECES not in item:
                return text, item
            again = self._item(item["pk"]["S"], item["sk"]["S"])
            if again is None or again == item:
                return text, item
            item = again
            table_ops.pause_after_conflict(attempt)
        raise Unavailable("The session is too busy right now; retry shortly.")

    def _text(self, item: Item) -> str:
        data = blobs.read(self._client, self._table, item, legacy_prefix=keys.payload_chunk_prefix(item["sk"]["S"]))
        return (data or b"").decode("utf-8")


def _exists(what: str) -> SessionConflict:
    return SessionConflict(f"This {what} exists already.", reason="exists")


def _refusal(
    old: Item | None,
    claim: Claim,
    *,
    now: float,
    written: Callable[[Item], bool],
    index: int | None = None,
    replacing: bool = False,
) -> Exception | None:
    """Why the head refused the claim, from the head as it was; None when this write is the one it holds."""
    if old is None:
        return NotFound("No such agent or multi-agent in this session: create it first.")
    version = get_int(old, strands_session_items.VERSION)
    mine = claim.writer is not None and get_s(old, strands_session_items.WRITER) == claim.writer
    if mine and version == claim.version + 1 and written(old):
        return None
    if version != claim.version:
        return SessionConflict(
            "Another run wrote this session since this one read it.", reason="moved", current_version=version
        )
    held = strands_session_items.holder(old, now=now)
    if held is not None and held[0] != claim.writer:
        return SessionConflict("Another run is writing this session.", reason="held", held_until=held[1])
    if replacing:
        return NotFound(f"The agent has no message {index}.")
    return SessionConflict(
        f"Message {index} is not the agent's next one.",
        reason="moved",
        current_version=version,
        messages=get_int(old, strands_session_items.MESSAGES),
    )
