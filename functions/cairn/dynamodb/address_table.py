"""Addresses, their feeds and idempotency records in the single table.

Implements `cairn.addresses.ports.AddressStore`. Appending is one
`TransactWriteItems`: the head's sequence moves from N to N+k only if it
still is N, the events are written, the idempotency record is claimed, the
quota is checked and state changes (if any) are applied, all or nothing.
The writer guesses N from its last write; a stale guess comes back with the
current head (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so no read
precedes the transaction. It guesses the head's subscription count the same
way: an append that finds none marks its events `unsubscribed`, under the
condition that the count is still zero, so the wake-up dispatcher (and the
stream's filter in AWS) passes them by without reading the subscriptions.
"""

from __future__ import annotations

import hmac
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from botocore.exceptions import ClientError
from msgspec.structs import replace

from cairn import credentials
from cairn.addresses import rate_windows
from cairn.addresses.inbox_settings import InboxSettings
from cairn.addresses.models import (
    Acknowledged,
    AddressRecord,
    AppendResult,
    ClaimedEvent,
    Event,
    EventRef,
    FeedCounts,
    FeedPage,
    IdempotencyClaim,
    TrimResult,
    event_id,
    sent_size,
)
from cairn.addresses.ports import (
    AlreadyProvisioned,
    AppendRequest,
    CredentialDerivation,
    HandoffMoved,
    InboxSettingsMoved,
    ProvisionClaim,
    RateCount,
    RateSpent,
    StateMoved,
    TrimRequest,
)
from cairn.addresses.quota import FeedQuota
from cairn.dynamodb import (
    address_items,
    blobs,
    feed_counts,
    keys,
    outbound_items,
    outcome_deadlines,
    ratelimit,
    read_count,
    send_ledger,
    state_items,
    table_ops,
)
from cairn.dynamodb.address_items import (
    CREDENTIAL_ATTRIBUTES,
    DELETED,
    INBOX_REVISION,
    LAST_SEQUENCE,
    PENDING_OUTCOMES,
    READ_TOKEN,
    SUBSCRIBERS,
)
from cairn.dynamodb.feed_trim import trim_feed
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, get_n, get_s, key, n, s
from cairn.errors import RateLimited, Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_APPEND_BUDGET_SECONDS = 10.0
_HINT_CAPACITY = 50_000
# Counted reads that lose to a moving window or a busy head, before the read answers busy.
_READ_ATTEMPTS = 8

CONDITION_FAILED = "ConditionalCheckFailed"
# On a provisioning claim: how its address derived its credentials.
_DERIVATION = "derivation"


class _Layout(msgspec.Struct):
    """Where the optional actions sit in one append transaction."""

    idempotency: int | None = None
    earlier_claims: int = 0
    quota: int | None = None
    allowance: int | None = None
    handoff: int | None = None
    state: int = 0


class AddressTable:
    """Storage of address heads, events and idempotency records."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        retention_seconds: int,
        max_events: int,
        owner_reserve: int = 0,
    ) -> None:
        self._client = client
        self._table = table_name
        self._retention = retention_seconds
        self._quota = FeedQuota(max_events, owner_reserve)
        self._hints: dict[str, int] = {}
        # The head's reserved outcome slots as last seen, guessed like the sequence.
        self._pending: dict[str, int] = {}
        # The read-rate window each address's head was last seen in (`read_count`).
        self._read_windows: dict[str, int] = {}
        # Addresses whose head was last seen with subscriptions (or with no count, written before
        # heads counted them); any other is guessed to have none, like a new one.
        self._subscribed: set[str] = set()
        self._hints_lock = threading.Lock()
        # Writers in one process take turns per address (striped), so they
        # never race each other's transactions; other processes still can.
        self._append_locks = [threading.Lock() for _ in range(64)]

    # -- heads ---------------------------------------------------------------

    def create(
        self, record: AddressRecord, *, rate: RateCount | None = None, claim: ProvisionClaim | None = None
    ) -> None:
        """Put the new head; with `rate` and `claim`, in one transaction with the rate's counter (see
        `ratelimit`) and the key's claim."""
        item = {**address_items.head_item(record), **read_count.new_head_attributes(record.created_at)}
        condition = "attribute_not_exists(pk)"
        put: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
        now = record.created_at
        writes: list[dict[str, Any]] = []
        if claim is not None:
            writes.append({"Put": self._claim_put(claim, record)})
        if rate is not None:
            writes.append(ratelimit.count_action(self._table, rate.scope, rate.subject, limit=rate.limit, now=now))
        if not writes:
            self._client.put_item(**put)
            self._remember(record.id, 0)
            self._remember_subscribed(record.id, False)
            return
        try:
            table_ops.transact_write(self._client, [*writes, {"Put": put}])
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            reasons = cancellation_reasons(error)
            failed = [reason.get("Code") == CONDITION_FAILED for reason in reasons] + [False] * len(writes)
            if claim is not None and failed[0]:
                # Decided first: a retry is answered with its address even when the rate is spent.
                raise self._already_provisioned(reasons[0].get("Item")) from error
            if rate is not None and failed[len(writes) - 1]:
                raise RateSpent(rate_windows.retry_after(now)) from error
            # A conflict with another creation on the counter or the claim: busy, and nothing was written.
            raise Unavailable() from error
        self._remember(record.id, 0)
        self._remember_subscribed(record.id, False)

    def _claim_put(self, claim: ProvisionClaim, record: AddressRecord) -> dict[str, Any]:
        item = {
            **key(keys.provision_claim_pk(claim.key_digest), keys.META),
            "address_id": s(record.id),
            "request_digest": s(claim.request_digest),
            # Claims made before there was a mark derived with the key alone (`_already_provisioned`).
            _DERIVATION: s(claim.derivation),
        }
        if record.expires_at is not None:
            # Kept as long as the address could be asked for again; TTL removes it with the head.
            item["expires_at"] = n(int(record.expires_at))
        return {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    @staticmethod
    def _already_provisioned(item: dict[str, Any] | None) -> AlreadyProvisioned:
        """The claim the refused put met, as its condition returned it (`ALL_OLD`)."""
        if not item:
            raise Unavailable()  # a refusal that came back without the claim: the client's retry decides
        derivation = CredentialDerivation(get_s(item, _DERIVATION) or CredentialDerivation.KEY)
        return AlreadyProvisioned(get_s(item, "address_id") or "", get_s(item, "request_digest") or "", derivation)

    def load(self, address_id: str) -> AddressRecord | None:
        """The head of a live or expired address; None once deleted or unknown."""
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.META),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return address_items.record_from_item(item) if item else None

    def admit_read(self, address_id: str, read_token_digest: str, *, limit: int, now: float) -> AddressRecord:
        """The live head the digest opens, one read counted on it in the same update (`read_count`).

        A failed condition returns the head as it is (none when there is no
        head), so a refusal is decided on the head as stored, with no read.
        """
        window = rate_windows.window_of(now)
        pk = key(keys.address_pk(address_id), keys.META)
        for attempt in range(_READ_ATTEMPTS):
            same_window = self._read_windows.get(address_id, window) >= window
            update = read_count.update(read_token_digest, limit=limit, now=now, same_window=same_window)
            try:
                response = self._client.update_item(TableName=self._table, Key=pk, **update)
            except ClientError as error:
                if not table_ops.condition_failed(error, attempt):
                    continue
                head: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
                verdict = read_count.verdict(head, read_token_digest, limit=limit, now=now)
                if not verdict.admitted:
                    raise Unauthorized() from error
                if verdict.spent:
                    raise RateSpent(rate_windows.retry_after(now)) from error
                self._remember_read_window(address_id, -1 if verdict.window is None else verdict.window)
                continue
            item = response["Attributes"]
            self._remember_read_window(address_id, get_int(item, read_count.WINDOW))
            record = address_items.record_from_item(item)
            if record is None:  # the condition excludes a deleted head
                raise Unauthorized()
            return record
        raise Unavailable("The address is too busy right now; retry shortly.")

    def delete(
        self, address_id: str, read_token_digest: str, *, before_sweep: Callable[[], None] | None = None
    ) -> bool:
        """Close the address at once, then remove everything under it.

        The head is marked first, so no append can commit after the sweep
        starts (nor after `before_sweep` reads the events); the head itself
        goes last. The read token is the one condition of the mark: a head
        already marked still admits its owner (a sweep that a storage fault
        cut short is finished by the owner's retry), and so does an expired
        one that TTL has not reclaimed yet.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(address_id), keys.META),
                UpdateExpression="SET #deleted = :t",
                ConditionExpression="#cred = :digest",
                ExpressionAttributeNames={"#cred": READ_TOKEN, "#deleted": DELETED},
                ExpressionAttributeValues={":t": {"BOOL": True}, ":digest": s(read_token_digest)},
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        if before_sweep is not None:
            before_sweep()
        pk = keys.address_pk(address_id)
        item_keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for item in table_ops.query_range(self._client, self._table, pk, ProjectionExpression="pk, sk")
            if item["sk"]["S"] != keys.META
        ]
        table_ops.batch_delete(
            self._client,
            self._table,
            [*item_keys, key(pk, keys.META)],
            exhausted=lambda: Unavailable("Deletion is throttled; retry shortly."),
        )
        self._forget(address_id)
        return True

    def save_inbox_settings(
        self, address_id: str, read_token_digest: str, settings: InboxSettings, *, now: float
    ) -> bool:
        """Compare-and-set of the inbox settings on the head, under the read token; False when refused."""
        seen = settings.revision - 1
        attributes = address_items.inbox_attributes(settings)
        names = {f"#a{index}": name for index, name in enumerate(attributes)}
        values = {f":a{index}": value for index, value in enumerate(attributes.values())}
        (held,) = [placeholder for placeholder, name in names.items() if name == INBOX_REVISION]
        revision = f"attribute_not_exists({held})" if seen == 0 else f"{held} = :seen"
        if seen:
            values[":seen"] = n(seen)
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(address_id), keys.META),
                UpdateExpression="SET " + ", ".join(f"{name} = :{name[1:]}" for name in names),
                ConditionExpression=f"#cred = :digest AND attribute_not_exists(#deleted) AND {revision}"
                " AND (attribute_not_exists(expires_at) OR expires_at > :now)",
                ExpressionAttributeNames={**names, "#cred": READ_TOKEN, "#deleted": DELETED},
                ExpressionAttributeValues={**values, ":digest": s(read_token_digest), ":now": n(int(now))},
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # -- appends -------------------------------------------------------------

    def append(self, request: AppendRequest) -> AppendResult:
        """Append events atomically; see the module docstring for the protocol.

        Losing a race is normal on a busy address: the loser learns the new
        head and tries again, with a growing random pause so that no writer
        starves, until `_APPEND_BUDGET_SECONDS` have passed.
        """
        if request.outcome_slots > 0 and request.outcome_deadline is None:
            raise ValueError("a reserved outcome slot needs its deadline")
        if len(request.events) + max(request.outcome_slots, 0) > self._quota.capacity(request.writer):
            # More events than the feed may hold at all: no transaction could pass its quota check.
            raise self._quota.refusal(request.writer)
        with self._append_locks[hash(request.address_id) % len(self._append_locks)]:
            return self._append(request)

    def _append(self, request: AppendRequest) -> AppendResult:
        # Both are lower bounds of the head: another writer of this process
        # may have appended since the caller read it.
        last = max(request.last_sequence or 0, self._hint(request.address_id))
        deadline = time.monotonic() + _APPEND_BUDGET_SECONDS
        attempt = 0
        while True:
            pending = self._pending.get(request.address_id, 0)
            subscribed = request.address_id in self._subscribed
            actions, refs, layout = self._append_actions(request, last, pending, subscribed=subscribed)
            try:
                table_ops.transact_write(self._client, actions)
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
            self._remember_pending(request.address_id, max(0, pending + request.outcome_slots))
            return AppendResult(events=refs)

    def _append_actions(
        self, request: AppendRequest, last: int, pending: int, *, subscribed: bool
    ) -> tuple[list[dict[str, Any]], list[EventRef], _Layout]:
        pk = keys.address_pk(request.address_id)
        now = request.now
        new_last = last + len(request.events)
        new_pending = max(0, pending + request.outcome_slots)
        # The reserved outcome slots are part of the head's guess, so the quota below counts them exactly.
        condition = (
            "#last = :last AND attribute_not_exists(#deleted)"
            " AND (attribute_not_exists(expires_at) OR expires_at > :now)"
            " AND (attribute_not_exists(#pending) OR #pending = :pending)"
        )
        expires_at = int(now) + self._retention
        counted = feed_counts.on_append(last, len(request.events), expires_at, self._quota.max_events)
        names = {"#last": LAST_SEQUENCE, "#deleted": DELETED, "#pending": PENDING_OUTCOMES, **counted.names}
        values = {":new": n(new_last), ":last": n(last), ":now": n(int(now)), ":pending": n(pending), **counted.values}
        sets = "#last = :new"
        if new_pending != pending:
            sets += ", #pending = :new_pending"
            values[":new_pending"] = n(new_pending)
        head: dict[str, Any] = {
            "Update": {
                "TableName": self._table,
                "Key": key(pk, keys.META),
                "UpdateExpression": counted.expression(leading_sets=sets),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        if request.inbox_revision is not None:
            names["#inbox"] = INBOX_REVISION
            if request.inbox_revision:
                condition += " AND #inbox = :inbox"
                values[":inbox"] = n(request.inbox_revision)
            else:
                condition += " AND attribute_not_exists(#inbox)"
        if request.credential is not None:
            condition += " AND #cred = :digest"
            names["#cred"] = CREDENTIAL_ATTRIBUTES[request.credential.kind]
            values[":digest"] = s(request.credential.digest)
        if not subscribed:
            # The events are marked unsubscribed: true only while no subscription is created meanwhile.
            condition += " AND #subscribers = :zero"
            names["#subscribers"] = SUBSCRIBERS
            values[":zero"] = n(0)
        head["Update"]["ConditionExpression"] = condition
        actions: list[dict[str, Any]] = [head]
        refs: list[EventRef] = []
        for offset, event in enumerate(request.events, start=1):
            sequence = last + offset
            ref = EventRef(id=event_id(sequence, credentials.new_suffix()), sequence=sequence)
            refs.append(ref)
            items = address_items.event_items(
                request.address_id, ref, event, now=now, expires_at=expires_at, unsubscribed=not subscribed
            )
            event_item, *chunks = items
            actions.append(self._put(event_item, "attribute_not_exists(pk)"))
            actions.extend(self._put(chunk) for chunk in chunks)
        layout = _Layout()
        if request.idempotency is not None:
            first = refs[0]
            layout.idempotency = len(actions)
            claim = address_items.claim_item(request.address_id, request.idempotency, first, expires_at=expires_at)
            put = self._put(claim, "attribute_not_exists(pk) OR expires_at <= :now")
            put["Put"]["ExpressionAttributeValues"] = {":now": n(int(now))}
            put["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            actions.append(put)
        layout.earlier_claims = len(actions)
        for earlier in request.earlier_claims:
            claim_key = key(pk, keys.idempotency_sk(earlier.key_digest))
            actions.append(
                {
                    "ConditionCheck": {
                        "TableName": self._table,
                        "Key": claim_key,
                        "ConditionExpression": "attribute_not_exists(pk) OR expires_at <= :now",
                        "ExpressionAttributeValues": {":now": n(int(now))},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        # Events expire in sequence order and trims remove the oldest, so the
        # feed holds fewer than the writer's capacity exactly when the event
        # that many places back is gone (reserved outcome slots count as
        # events already there).
        oldest_allowed = new_last + new_pending - self._quota.capacity(request.writer)
        if oldest_allowed >= 1 and not _is_retried_send(request, oldest_allowed):
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
        if request.send_allowance is not None:
            layout.allowance = len(actions)
            actions.append(
                outbound_items.send_count_action(
                    self._table, request.address_id, limit=request.send_allowance.limit, now=now
                )
            )
        actions.extend(self._outcome_actions(request, refs, oldest_allowed, layout, len(actions)))
        layout.state = len(actions)
        if request.state is not None:
            actions.extend(state_items.change_actions(self._table, request.address_id, request.state, now=now))
        return actions, refs, layout

    def _outcome_actions(
        self, request: AppendRequest, refs: list[EventRef], oldest_allowed: int, layout: _Layout, at: int
    ) -> list[dict[str, Any]]:
        """A reserved slot's deadline, and the retried hand-off it is for (its actions start at index `at`)."""
        actions: list[dict[str, Any]] = []
        if request.outcome_slots > 0 and request.outcome_deadline is not None:
            # Unconditional: the slot and its deadline commit together, or neither does.
            send = request.outcome_deadline.send or refs[0]
            actions.append(
                outcome_deadlines.deadline_put(self._table, request.address_id, send, request.outcome_deadline)
            )
        if request.retried_handoff is not None:
            layout.handoff = at + len(actions)
            # One item takes one action: when the quota's event is the send itself, its action checks both.
            with_quota = _is_retried_send(request, oldest_allowed)
            if with_quota:
                layout.quota = layout.handoff
            actions.append(
                send_ledger.retry_action(
                    self._table, request.address_id, request.retried_handoff, now=request.now, feed_quota=with_quota
                )
            )
        return actions

    def _put(self, item: dict[str, Any], condition: str | None = None) -> dict[str, Any]:
        put: dict[str, Any] = {"TableName": self._table, "Item": item}
        if condition is not None:
            put["ConditionExpression"] = condition
        return {"Put": put}

    def _diagnose(
        self, request: AppendRequest, reasons: list[dict[str, Any]], last: int, layout: _Layout
    ) -> AppendResult | int:
        """Turn cancellation reasons into a verdict, or the next attempt's head.

        Order matters: credentials first (a wrong secret learns nothing), then
        a retained duplicate (which uses no slot), then a moved head, then quota.
        """
        if not reasons:
            raise Unavailable()
        head_code = reasons[0].get("Code")
        contended = any(reason.get("Code") not in ("None", CONDITION_FAILED, None) for reason in reasons)
        stale = False
        if head_code == CONDITION_FAILED:
            stale, last = self._diagnose_head(request, reasons[0].get("Item"), last)
        elif head_code not in ("None", None):
            return last
        duplicate = _retained_duplicate(request, reasons, layout)
        if duplicate is not None:
            return duplicate
        if stale or contended:
            return last
        self._refuse(request, reasons, layout)
        return last

    def _diagnose_head(self, request: AppendRequest, head: dict[str, Any] | None, last: int) -> tuple[bool, int]:
        """Whether the head the failed condition returned moved since `last` was guessed, and its last sequence.

        Raises for a head that refuses the writer, or whose inbox settings changed under the post.
        """
        if not head or DELETED in head or not _head_admits(head, request):
            raise Unauthorized()
        settings = address_items.inbox_from_item(head)
        if request.inbox_revision is not None and settings.revision != request.inbox_revision:
            raise InboxSettingsMoved(settings)
        current = get_int(head, LAST_SEQUENCE)
        current_pending = get_int(head, PENDING_OUTCOMES)
        subscribed = get_n(head, SUBSCRIBERS) != 0
        stale = (
            current != last
            or current_pending != self._pending.get(request.address_id, 0)
            or subscribed != (request.address_id in self._subscribed)
        )
        self._remember_pending(request.address_id, current_pending)
        self._remember_subscribed(request.address_id, subscribed)
        return stale, current

    def _refuse(self, request: AppendRequest, reasons: list[dict[str, Any]], layout: _Layout) -> None:
        """Raise the refusal a failed limit's condition stands for; return when none failed."""
        if layout.allowance is not None and reasons[layout.allowance].get("Code") == CONDITION_FAILED:
            raise RateLimited(
                "This address has sent its maximum of mails for today (UTC).",
                retry_after=outbound_items.seconds_to_next_day(request.now),
            )
        if layout.quota is not None and reasons[layout.quota].get("Code") == CONDITION_FAILED:
            raise self._quota.refusal(request.writer)
        if layout.handoff is not None and reasons[layout.handoff].get("Code") == CONDITION_FAILED:
            raise HandoffMoved()
        if any(reason.get("Code") == CONDITION_FAILED for reason in reasons[layout.state :]):
            raise StateMoved()

    # -- reads ---------------------------------------------------------------

    def list_events(self, address_id: str, *, after: int, limit: int, now: float, max_bytes: int) -> FeedPage:
        """Up to `limit` live events after sequence `after`, oldest first, within `max_bytes` as sent.

        An answer is measured as Lambda will carry it (`jsontext.sent_size`), so
        a page of escaped text cannot outgrow its budget; the first event
        always comes, and one event (a 1 MB body) is far below Lambda's cap.
        """
        pk = keys.address_pk(address_id)
        events: list[Event] = []
        size = 0
        items = table_ops.query_range(
            self._client,
            self._table,
            pk,
            keys.event_sk(after + 1),
            keys.events_upper_bound(),
            page_size=limit + 1,
        )
        for item in items:
            if get_int(item, "expires_at") <= now:
                continue
            if len(events) == limit:
                return FeedPage(events=events, has_more=True)
            event = self._event_from_item(item)
            size += sent_size(event)
            if events and size > max_bytes:
                return FeedPage(events=events, has_more=True)
            events.append(event)
        return FeedPage(events=events, has_more=False)

    def count_events(self, address_id: str, *, now: float) -> FeedCounts:
        """The feed's depth from the head's counters (`feed_counts`); read from the events for older heads."""
        pk = keys.address_pk(address_id)
        head = self._client.get_item(TableName=self._table, Key=key(pk, keys.META), ConsistentRead=True).get("Item")
        last_sequence = get_int(head or {}, LAST_SEQUENCE)
        if head and feed_counts.COUNTED in head:
            return replace(feed_counts.counts(head, now=now), last_sequence=last_sequence)
        retained = unacknowledged = 0
        if last_sequence == 0:
            return FeedCounts(retained=0, unacknowledged=0)
        projection = "expires_at, acknowledged_at"
        # Only the events the head had when read: appends that commit while the query pages
        # would otherwise be counted past the last sequence reported beside them.
        for item in table_ops.query_range(
            self._client,
            self._table,
            pk,
            keys.event_sk(1),
            keys.event_sk(last_sequence),
            ProjectionExpression=projection,
        ):
            if get_int(item, "expires_at") > now:
                retained += 1
                unacknowledged += "acknowledged_at" not in item
        return FeedCounts(retained=retained, unacknowledged=unacknowledged, last_sequence=last_sequence)

    def load_event(self, address_id: str, sequence: int, *, now: float) -> Event | None:
        """One live event by its sequence, or None."""
        pk = keys.address_pk(address_id)
        response = self._client.get_item(
            TableName=self._table, Key=key(pk, keys.event_sk(sequence)), ConsistentRead=True
        )
        item = response.get("Item")
        if not item or get_int(item, "expires_at") <= now:
            return None
        return self._event_from_item(item)

    def claimed_event(self, address_id: str, key_digest: str, *, now: float) -> ClaimedEvent | None:
        """The event a live idempotency claim points to, with the claiming request's digest, or None."""
        response = self._client.get_item(
            TableName=self._table,
            Key=key(keys.address_pk(address_id), keys.idempotency_sk(key_digest)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item or get_int(item, "expires_at") <= now:
            return None
        return ClaimedEvent(ref=address_items.claimed_ref(item), request_digest=address_items.claimed_request(item))

    def acknowledge(
        self, address_id: str, sequence: int, event_id_text: str, *, now: float, read_token_digest: str | None = None
    ) -> Acknowledged | None:
        """Mark an event handled; the first acknowledgement's time is kept.

        One transaction: the event gets its time under the condition that it
        is this live event not yet acknowledged, and the head counts it
        (`feed_counts`), under the read token when one is given. A failed
        condition returns the items as they are, which tell a repeat (the
        first time is answered), an event that is not there (None) and a
        refusal (`Unauthorized`, checked first) apart without a read.
        """
        pk = keys.address_pk(address_id)
        counted = feed_counts.on_acknowledge(sequence)
        acknowledged_at = round(now, 3)
        head_condition = "attribute_exists(pk)"
        names, values = dict(counted.names), dict(counted.values)
        if read_token_digest is not None:
            head_condition = (
                "#cred = :digest AND attribute_not_exists(#deleted)"
                " AND (attribute_not_exists(expires_at) OR expires_at > :now)"
            )
            names.update({"#cred": READ_TOKEN, "#deleted": DELETED})
            values.update({":digest": s(read_token_digest), ":now": n(int(now))})
        # The head first: its credential is decided before anything is told of the event.
        actions = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(pk, keys.META),
                    "UpdateExpression": counted.expression(),
                    "ConditionExpression": head_condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(pk, keys.event_sk(sequence)),
                    "UpdateExpression": "SET acknowledged_at = :at",
                    "ConditionExpression": (
                        "event_id = :id AND expires_at > :now AND attribute_not_exists(acknowledged_at)"
                    ),
                    "ExpressionAttributeValues": {
                        ":at": n(acknowledged_at),
                        ":id": s(event_id_text),
                        ":now": n(int(now)),
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        try:
            table_ops.transact_write(self._client, actions)
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            reasons = cancellation_reasons(error)
            failed = [reason.get("Code") == CONDITION_FAILED for reason in reasons]
            decided = all(reason.get("Code") in ("None", CONDITION_FAILED) for reason in reasons)
            # Only conditions that were evaluated tell anything: a head held by another write tells nothing
            # of the credential, so a repeat is not answered until it does.
            if len(failed) != len(actions) or not any(failed) or not decided:
                raise Unavailable("The address is too busy right now; retry shortly.") from error
            head_reason, event_reason = reasons
            if failed[0]:
                if read_token_digest is None:
                    return None  # no head: the address is gone
                if not address_items.head_opens(head_reason.get("Item"), read_token_digest, now=now):
                    raise Unauthorized() from error
            if not failed[1]:
                # The head's condition failed for a head that admits: it changed in between; busy.
                raise Unavailable("The address is too busy right now; retry shortly.") from error
            # Acknowledged before (its time is kept), trimmed, expired, or another event's id.
            item = event_reason.get("Item")
            if not item or get_int(item, "expires_at") <= now or get_s(item, "event_id") != event_id_text:
                return None
            first = get_n(item, "acknowledged_at")
            return None if first is None else Acknowledged(id=event_id_text, sequence=sequence, acknowledged_at=first)
        return Acknowledged(id=event_id_text, sequence=sequence, acknowledged_at=acknowledged_at)

    def trim(self, request: TrimRequest) -> TrimResult:
        return trim_feed(
            self._client,
            self._table,
            request.address_id,
            request.read_token_digest,
            floor=request.floor,
            counted_from=max(request.last - self._quota.max_events + 1, 0),
            through=request.through,
            include_unacknowledged=request.include_unacknowledged,
            now=request.now,
        )

    # -- helpers -------------------------------------------------------------

    def _event_from_item(self, item: dict[str, Any]) -> Event:
        """The event with its data, joined from its pieces when it has some."""
        legacy = keys.legacy_event_chunk_prefix(get_int(item, "seq"))
        data = blobs.read(self._client, self._table, item, legacy_prefix=legacy)
        return address_items.event_from_item(item, None if data is None else data.decode())

    def _hint(self, address_id: str) -> int:
        return self._hints.get(address_id, 0)

    def _remember(self, address_id: str, last: int) -> None:
        with self._hints_lock:
            if len(self._hints) >= _HINT_CAPACITY:
                self._hints.clear()
            if last > self._hints.get(address_id, -1) or last == 0:
                self._hints[address_id] = last

    def _remember_pending(self, address_id: str, pending: int) -> None:
        with self._hints_lock:
            if len(self._pending) >= _HINT_CAPACITY:
                self._pending.clear()
            self._pending[address_id] = pending

    def _remember_read_window(self, address_id: str, window: int) -> None:
        with self._hints_lock:
            if len(self._read_windows) >= _HINT_CAPACITY:
                self._read_windows.clear()
            self._read_windows[address_id] = window

    def _remember_subscribed(self, address_id: str, subscribed: bool) -> None:
        with self._hints_lock:
            if not subscribed:
                self._subscribed.discard(address_id)
                return
            if len(self._subscribed) >= _HINT_CAPACITY:
                self._subscribed.clear()
            self._subscribed.add(address_id)

    def _forget(self, address_id: str) -> None:
        with self._hints_lock:
            self._hints.pop(address_id, None)
            self._pending.pop(address_id, None)
            self._read_windows.pop(address_id, None)
            self._subscribed.discard(address_id)


def _is_retried_send(request: AppendRequest, sequence: int) -> bool:
    """Whether `sequence` is the send whose refused hand-off the request retries."""
    return request.retried_handoff is not None and request.retried_handoff.sequence == sequence


def _head_admits(head: dict[str, Any], request: AppendRequest) -> bool:
    """Whether a head's failure was only a moved sequence, not a refusal."""
    expires_at = get_n(head, "expires_at")
    live = expires_at is None or expires_at > int(request.now)
    if request.credential is None:
        return live
    stored = get_s(head, CREDENTIAL_ATTRIBUTES[request.credential.kind]) or ""
    return live and hmac.compare_digest(stored, request.credential.digest)


def _retained_duplicate(request: AppendRequest, reasons: list[dict[str, Any]], layout: _Layout) -> AppendResult | None:
    """The earlier delivery a failed idempotency claim returned, if the append repeats one still retained."""
    if request.idempotency is not None and layout.idempotency is not None:
        reason = reasons[layout.idempotency]
        if reason.get("Code") == CONDITION_FAILED and reason.get("Item"):
            return _duplicate(reason["Item"], request.idempotency)
    for offset, earlier in enumerate(request.earlier_claims):
        reason = reasons[layout.earlier_claims + offset]
        if reason.get("Code") == CONDITION_FAILED and reason.get("Item"):
            return _duplicate(reason["Item"], earlier)
    return None


def _duplicate(item: dict[str, Any], claim: IdempotencyClaim) -> AppendResult:
    claim.check_same_request(address_items.claimed_request(item))
    return AppendResult(events=[address_items.claimed_ref(item)], duplicate=True)
