"""Addresses, their feeds and idempotency records in the single table.

Appending is one `TransactWriteItems`: the head's sequence moves from N to
N+k only if it still is N, the events are written, the idempotency record is
claimed and the quota is checked, all or nothing. The writer guesses N from
its last write; a stale guess comes back with the current head
(`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so no read precedes the
transaction.
"""

from __future__ import annotations

import hmac
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from cairn import credentials
from cairn.addresses.models import (
    AddressRecord,
    AppendResult,
    Event,
    EventRef,
    FeedCounts,
    FeedPage,
    IdempotencyClaim,
    NewEvent,
    event_id,
)
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.items import b, cancellation_reasons, error_code, get_int, get_n, get_s, key, n, s
from cairn.errors import IdempotencyKeyReused, QuotaExceeded, Unauthorized, Unavailable

_APPEND_BUDGET_SECONDS = 10.0
_BATCH_WRITE_SIZE = 25
_HINT_CAPACITY = 50_000

CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class Credential:
    """The head attribute that must hold the digest of the caller's secret."""

    attribute: str
    digest: str


READ_TOKEN = "read_token_digest"
INBOX_SECRET = "inbox_secret_digest"


@dataclass
class AppendRequest:
    """Events to append under a credential, with optional extra actions.

    `credential` None is for trusted internal writers (inbound email) that
    need only a live address, never for a client request.

    `extra_actions` join the same transaction (the state document, for one);
    when one of their conditions fails, `append` raises `ExtraConditionFailed`
    carrying the current items so the caller can decide.
    """

    address_id: str
    events: Sequence[NewEvent]
    credential: Credential | None
    now: float
    idempotency: IdempotencyClaim | None = None
    extra_actions: list[dict[str, Any]] = field(default_factory=list)
    # The head's sequence when the caller has just read it; else a guess.
    last_sequence: int | None = None


@dataclass
class _Layout:
    """Where the optional actions sit in one append transaction."""

    idempotency: int | None = None
    quota: int | None = None
    extra: int = 0


class ExtraConditionFailed(Exception):
    """A caller-supplied action's condition failed; `items` are their current values."""

    def __init__(self, items: list[dict[str, Any] | None]) -> None:
        super().__init__("a condition of the caller's own actions failed")
        self.items = items


class AddressTable:
    """Storage of address heads, events and idempotency records."""

    def __init__(self, client, table_name: str, *, retention_seconds: int, max_events: int) -> None:
        self._client = client
        self._table = table_name
        self._retention = retention_seconds
        self._max_events = max_events
        self._hints: dict[str, int] = {}
        self._hints_lock = threading.Lock()
        # Writers in one process take turns per address (striped), so they
        # never race each other's transactions; other processes still can.
        self._append_locks = [threading.Lock() for _ in range(64)]

    # -- heads ---------------------------------------------------------------

    def create(self, record: AddressRecord) -> None:
        item = {
            **key(keys.address_pk(record.id), keys.META),
            "address_id": s(record.id),
            "email": s(record.email),
            "created_at": n(record.created_at),
            READ_TOKEN: s(record.read_token_digest),
            INBOX_SECRET: s(record.inbox_secret_digest),
            "last_seq": n(0),
        }
        if record.task_id is not None:
            item["task_id"] = s(record.task_id)
        if record.name is not None:
            item["name"] = s(record.name)
        if record.expires_at is not None:
            item["expires_at"] = n(int(record.expires_at))
        self._client.put_item(
            TableName=self._table,
            Item=item,
            ConditionExpression="attribute_not_exists(pk)",
        )
        self._remember(record.id, 0)

    def load(self, address_id: str) -> AddressRecord | None:
        """The head of a live or expired address; None once deleted or unknown."""
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.META),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return record_from_item(item) if item else None

    def delete(self, address_id: str, read_token_digest: str, *, now: float) -> bool:
        """Close the address at once, then remove everything under it.

        The head is marked first, so no append can commit after the sweep
        starts; the head itself goes last. The read token is a condition of
        the mark, and a head already marked still admits its owner: a sweep
        that a storage fault cut short is finished by the owner's retry.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(address_id), keys.META),
                UpdateExpression="SET deleted = :t",
                ConditionExpression=(
                    "#cred = :digest"
                    " AND (attribute_exists(deleted) OR attribute_not_exists(expires_at) OR expires_at > :now)"
                ),
                ExpressionAttributeNames={"#cred": READ_TOKEN},
                ExpressionAttributeValues={":t": {"BOOL": True}, ":digest": s(read_token_digest), ":now": n(int(now))},
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        pk = keys.address_pk(address_id)
        item_keys = [k for k in self._all_keys(pk) if k["sk"]["S"] != keys.META]
        self._batch_delete(item_keys + [key(pk, keys.META)])
        self._forget(address_id)
        return True

    # -- appends -------------------------------------------------------------

    def append(self, request: AppendRequest) -> AppendResult:
        """Append events atomically; see the module docstring for the protocol.

        Losing a race is normal on a busy address: the loser learns the new
        head and tries again, with a growing random pause so that no writer
        starves, until `_APPEND_BUDGET_SECONDS` have passed.
        """
        with self._append_locks[hash(request.address_id) % len(self._append_locks)]:
            return self._append(request)

    def _append(self, request: AppendRequest) -> AppendResult:
        # Both are lower bounds of the head: another writer of this process
        # may have appended since the caller read it.
        last = max(request.last_sequence or 0, self._hint(request.address_id))
        deadline = time.monotonic() + _APPEND_BUDGET_SECONDS
        attempt = 0
        while True:
            actions, refs, layout = self._append_actions(request, last)
            try:
                self._client.transact_write_items(TransactItems=actions)
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                outcome = self._diagnose(request, cancellation_reasons(error), last, layout)
                if isinstance(outcome, AppendResult):
                    return outcome
                self._remember(request.address_id, outcome)
                attempt += 1
                if time.monotonic() >= deadline:
                    raise Unavailable("The address is too busy right now; retry shortly.") from error
                time.sleep(random.uniform(0, 0.001 * min(2**attempt, 50)))
                # Other writers may have moved the head during the pause.
                last = max(outcome, self._hint(request.address_id))
                continue
            self._remember(request.address_id, last + len(request.events))
            return AppendResult(events=refs)

    def _append_actions(self, request: AppendRequest, last: int) -> tuple[list[dict], list[EventRef], _Layout]:
        pk = keys.address_pk(request.address_id)
        now = request.now
        new_last = last + len(request.events)
        condition = (
            "last_seq = :last AND attribute_not_exists(deleted)"
            " AND (attribute_not_exists(expires_at) OR expires_at > :now)"
        )
        values = {":new": n(new_last), ":last": n(last), ":now": n(int(now))}
        head: dict[str, Any] = {
            "Update": {
                "TableName": self._table,
                "Key": key(pk, keys.META),
                "UpdateExpression": "SET last_seq = :new",
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        if request.credential is not None:
            condition += " AND #cred = :digest"
            head["Update"]["ExpressionAttributeNames"] = {"#cred": request.credential.attribute}
            values[":digest"] = s(request.credential.digest)
        head["Update"]["ConditionExpression"] = condition
        actions: list[dict] = [head]
        refs: list[EventRef] = []
        expires_at = int(now) + self._retention
        for offset, event in enumerate(request.events, start=1):
            sequence = last + offset
            ref = EventRef(id=event_id(sequence, credentials.new_suffix()), sequence=sequence)
            refs.append(ref)
            actions.extend(self._event_puts(pk, ref, event, now, expires_at))
        layout = _Layout()
        if request.idempotency is not None:
            first = refs[0]
            layout.idempotency = len(actions)
            actions.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **key(pk, keys.idempotency_sk(request.idempotency.key_digest)),
                            "request_digest": s(request.idempotency.request_digest),
                            "event_id": s(first.id),
                            "seq": n(first.sequence),
                            "expires_at": n(expires_at),
                        },
                        "ConditionExpression": "attribute_not_exists(pk) OR expires_at <= :now",
                        "ExpressionAttributeValues": {":now": n(int(now))},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        # Events expire in sequence order, so the feed holds fewer than the
        # maximum exactly when the event `max_events` places back is gone.
        oldest_allowed = new_last - self._max_events
        if oldest_allowed >= 1:
            layout.quota = len(actions)
            actions.append(
                {
                    "ConditionCheck": {
                        "TableName": self._table,
                        "Key": key(pk, keys.event_sk(oldest_allowed)),
                        "ConditionExpression": "attribute_not_exists(pk) OR expires_at <= :now",
                        "ExpressionAttributeValues": {":now": n(int(now))},
                    }
                }
            )
        layout.extra = len(actions)
        actions.extend(request.extra_actions)
        return actions, refs, layout

    def _event_puts(self, pk: str, ref: EventRef, event: NewEvent, now: float, expires_at: int) -> list[dict]:
        item = {
            **key(pk, keys.event_sk(ref.sequence)),
            "event_id": s(ref.id),
            "seq": n(ref.sequence),
            "type": s(event.type),
            "source": s(event.source),
            "created_at": n(round(now, 3)),
            "expires_at": n(expires_at),
        }
        chunks = blobs.pieces(event.data_json.encode())
        puts = []
        if len(chunks) == 1:
            item["data"] = s(event.data_json)
        else:
            item["data_chunks"] = n(len(chunks))
            for index, piece in enumerate(chunks):
                chunk = {
                    **key(pk, keys.chunk_sk(ref.sequence, index)),
                    "data": b(piece),
                    "expires_at": n(expires_at),
                }
                puts.append({"Put": {"TableName": self._table, "Item": chunk}})
        condition = {"ConditionExpression": "attribute_not_exists(pk)"}
        return [{"Put": {"TableName": self._table, "Item": item, **condition}}, *puts]

    def _diagnose(
        self, request: AppendRequest, reasons: list[dict], last: int, layout: _Layout
    ) -> AppendResult | int:
        """Turn cancellation reasons into a verdict, or the next attempt's head.

        Order matters: credentials first (a wrong secret learns nothing), then
        a retained duplicate (which uses no slot), then a moved head, then quota.
        """
        if not reasons:
            raise Unavailable()
        head_reason = reasons[0]
        contended = any(reason.get("Code") not in ("None", CONDITION_FAILED, None) for reason in reasons)
        stale = False
        if head_reason.get("Code") == CONDITION_FAILED:
            head = head_reason.get("Item")
            if not head or "deleted" in head or not _head_admits(head, request):
                raise Unauthorized()
            current = get_int(head, "last_seq")
            stale = current != last
            last = current
        elif head_reason.get("Code") not in ("None", None):
            return last
        if request.idempotency is not None and layout.idempotency is not None:
            reason = reasons[layout.idempotency]
            if reason.get("Code") == CONDITION_FAILED and reason.get("Item"):
                return _duplicate(reason["Item"], request.idempotency)
        if stale or contended:
            return last
        if layout.quota is not None and reasons[layout.quota].get("Code") == CONDITION_FAILED:
            raise QuotaExceeded(
                f"The address holds the maximum of {self._max_events} retained events.",
                max_events=self._max_events,
            )
        extra = reasons[layout.extra :]
        if any(reason.get("Code") == CONDITION_FAILED for reason in extra):
            raise ExtraConditionFailed([reason.get("Item") for reason in extra])
        return last

    # -- reads ---------------------------------------------------------------

    def list_events(self, address_id: str, *, after: int, limit: int, now: float, max_bytes: int) -> FeedPage:
        """Up to `limit` live events after sequence `after`, oldest first."""
        pk = keys.address_pk(address_id)
        events: list[Event] = []
        size = 0
        for item in self._query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": s(pk),
                ":lo": s(keys.event_sk(after + 1)),
                ":hi": s(keys.events_upper_bound()),
            },
            page_size=limit + 1,
        ):
            if get_int(item, "expires_at") <= now:
                continue
            if len(events) == limit:
                return FeedPage(events=events, has_more=True)
            event = self._event_from_item(pk, item)
            size += len(event.data_json)
            if events and size > max_bytes:
                return FeedPage(events=events, has_more=True)
            events.append(event)
        return FeedPage(events=events, has_more=False)

    def count_events(self, address_id: str, *, now: float) -> FeedCounts:
        retained = unacknowledged = 0
        for item in self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            ExpressionAttributeValues={":pk": s(keys.address_pk(address_id)), ":e": s("E#")},
            ProjectionExpression="expires_at, acknowledged_at",
        ):
            if get_int(item, "expires_at") > now:
                retained += 1
                unacknowledged += "acknowledged_at" not in item
        return FeedCounts(retained=retained, unacknowledged=unacknowledged)

    def load_event(self, address_id: str, sequence: int, *, now: float) -> Event | None:
        """One live event by its sequence, or None."""
        pk = keys.address_pk(address_id)
        response = self._client.get_item(TableName=self._table, Key=key(pk, keys.event_sk(sequence)), ConsistentRead=True)
        item = response.get("Item")
        if not item or get_int(item, "expires_at") <= now:
            return None
        return self._event_from_item(pk, item)

    def claimed_event(self, address_id: str, key_digest: str, *, now: float) -> EventRef | None:
        """The event a live idempotency claim points to, or None."""
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.idempotency_sk(key_digest)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item or get_int(item, "expires_at") <= now:
            return None
        return EventRef(id=get_s(item, "event_id") or "", sequence=get_int(item, "seq"))

    def acknowledge(self, address_id: str, sequence: int, event_id_text: str, *, now: float) -> Event | None:
        """Mark an event handled; the first acknowledgement's time is kept."""
        pk = keys.address_pk(address_id)
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=key(pk, keys.event_sk(sequence)),
                UpdateExpression="SET acknowledged_at = if_not_exists(acknowledged_at, :now)",
                ConditionExpression="event_id = :id AND expires_at > :now_s",
                ExpressionAttributeValues={
                    ":now": n(round(now, 3)),
                    ":id": s(event_id_text),
                    ":now_s": n(int(now)),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return self._event_from_item(pk, response["Attributes"], with_data=False)

    # -- helpers -------------------------------------------------------------

    def _event_from_item(self, pk: str, item: dict[str, Any], *, with_data: bool = True) -> Event:
        sequence = get_int(item, "seq")
        data_json = get_s(item, "data")
        if data_json is None and with_data and "data_chunks" in item:
            data_json = self._read_chunks(pk, sequence)
        return Event(
            id=get_s(item, "event_id") or "",
            sequence=sequence,
            type=get_s(item, "type") or "",
            source=get_s(item, "source") or "",
            data_json=data_json or "null",
            created_at=get_n(item, "created_at") or 0.0,
            expires_at=get_n(item, "expires_at") or 0.0,
            acknowledged_at=get_n(item, "acknowledged_at"),
        )

    def _read_chunks(self, pk: str, sequence: int) -> str:
        prefix = keys.chunk_sk(sequence, 0)[:-3]
        pieces = [
            item["data"]["B"]
            for item in self._query(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :c)",
                ExpressionAttributeValues={":pk": s(pk), ":c": s(prefix)},
            )
        ]
        return b"".join(pieces).decode()

    def _query(self, *, page_size: int | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        params: dict[str, Any] = {"TableName": self._table, "ConsistentRead": True, **kwargs}
        if page_size is not None:
            params["Limit"] = page_size
        while True:
            response = self._client.query(**params)
            yield from response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _all_keys(self, pk: str) -> list[dict[str, Any]]:
        return list(
            self._query(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": s(pk)},
                ProjectionExpression="pk, sk",
            )
        )

    def _batch_delete(self, item_keys: list[dict[str, Any]]) -> None:
        for start in range(0, len(item_keys), _BATCH_WRITE_SIZE):
            pending = {
                self._table: [{"DeleteRequest": {"Key": k}} for k in item_keys[start : start + _BATCH_WRITE_SIZE]]
            }
            for attempt in range(10):
                response = self._client.batch_write_item(RequestItems=pending)
                pending = response.get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(0.05 * (attempt + 1))
            else:
                raise Unavailable("Deletion is throttled; retry shortly.")

    def _hint(self, address_id: str) -> int:
        return self._hints.get(address_id, 0)

    def _remember(self, address_id: str, last: int) -> None:
        with self._hints_lock:
            if len(self._hints) >= _HINT_CAPACITY:
                self._hints.clear()
            if last > self._hints.get(address_id, -1) or last == 0:
                self._hints[address_id] = last

    def _forget(self, address_id: str) -> None:
        with self._hints_lock:
            self._hints.pop(address_id, None)


def record_from_item(item: dict[str, Any]) -> AddressRecord | None:
    """The address a head item describes; None for a deleted one."""
    if "deleted" in item:
        return None
    return AddressRecord(
        id=get_s(item, "address_id") or "",
        task_id=get_s(item, "task_id"),
        name=get_s(item, "name"),
        email=get_s(item, "email") or "",
        created_at=get_n(item, "created_at") or 0.0,
        expires_at=get_n(item, "expires_at"),
        read_token_digest=get_s(item, READ_TOKEN) or "",
        inbox_secret_digest=get_s(item, INBOX_SECRET) or "",
        last_sequence=get_int(item, "last_seq"),
    )


def _head_admits(head: dict[str, Any], request: AppendRequest) -> bool:
    """Whether a head's failure was only a moved sequence, not a refusal."""
    expires_at = get_n(head, "expires_at")
    live = expires_at is None or expires_at > int(request.now)
    if request.credential is None:
        return live
    stored = get_s(head, request.credential.attribute) or ""
    return live and hmac.compare_digest(stored, request.credential.digest)


def _duplicate(item: dict[str, Any], claim: IdempotencyClaim) -> AppendResult:
    if not hmac.compare_digest(get_s(item, "request_digest") or "", claim.request_digest):
        raise IdempotencyKeyReused(
            "This Idempotency-Key was already used with a different request body.",
        )
    return AppendResult(events=[EventRef(id=get_s(item, "event_id") or "", sequence=get_int(item, "seq"))], duplicate=True)
