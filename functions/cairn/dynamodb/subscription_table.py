"""`SubscriptionStore` on the single table: subscriptions beside their address, retries in one schedule.

A subscription is `W#<id>` under its address, so deleting the address
deletes it; `WCOUNT` counts them and the limit is a condition of the
creating transaction, so racing creations never pass it. The address's head
counts them too (`subscribers`), in the same transactions: an append that
sees none there marks its events so the dispatcher need not look. Deliveries take a
lease on the subscription item (one sender at a time, hence sequence
order); `through` is the highest sequence the dispatcher has noted, and the
lease is only given back once the cursor has reached it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.address_items import DELETED, LAST_SEQUENCE, SUBSCRIBERS, UNCOUNTED_SUBSCRIBERS
from cairn.dynamodb.items import cancellation_reasons, error_code, get_int, get_s, key, n, s
from cairn.dynamodb.subscription_items import (
    ATTEMPTS,
    COUNT,
    CURSOR,
    FAILING_SINCE,
    FAILURES,
    LEASE_OWNER,
    LEASE_UNTIL,
    RETRY_AT,
    SECRETS,
    STATUS,
    THROUGH,
    attempts_value,
    secrets_value,
    subscription_from_item,
    subscription_item,
    subscription_key,
)
from cairn.errors import SubscriptionLimitExceeded, Unauthorized, Unavailable
from cairn.wakeups.models import Attempt, SigningSecret, Subscription, SubscriptionStatus, TargetKind
from cairn.wakeups.ports import CursorMoved, DueRetry, Progress, SubscriptionExists

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


class SubscriptionTable:
    def __init__(
        self, client: DynamoDBClient, table_name: str, *, scheduled: Callable[[float], None] | None = None
    ) -> None:
        """`scheduled(at)` is told of each retry once it is stored (`cairn serve`'s sweep runs at its time)."""
        self._client = client
        self._table = table_name
        self._scheduled = scheduled

    def create(self, subscription: Subscription, *, max_per_address: int, expires_at: float | None) -> None:
        pk = keys.address_pk(subscription.address_id)
        count = _count_on_head(pk, +1)
        # The cursor is still the last event: one taken meanwhile would be neither owed nor dispatched.
        count["ConditionExpression"] = "attribute_exists(pk) AND attribute_not_exists(#deleted) AND #last = :cursor"
        count["ExpressionAttributeNames"].update({"#deleted": DELETED, "#last": LAST_SEQUENCE})
        count["ExpressionAttributeValues"][":cursor"] = n(subscription.cursor)
        count["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        actions: list[dict[str, Any]] = [
            {"Update": {"TableName": self._table, **count}},
            {"Update": {"TableName": self._table, **_count_action(pk, max_per_address, expires_at)}},
            {
                "Put": {
                    "TableName": self._table,
                    "Item": subscription_item(subscription, expires_at=expires_at),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        try:
            table_ops.transact_write(self._client, actions)
        except ClientError as error:
            reasons = _reasons(error)
            if reasons[:1] == ["ConditionalCheckFailed"]:
                head = cancellation_reasons(error)[0].get("Item")
                if head is not None and DELETED not in head:
                    raise CursorMoved() from None
                raise Unauthorized() from None
            if reasons[1:2] == ["ConditionalCheckFailed"]:
                raise SubscriptionLimitExceeded(
                    f"An address has at most {max_per_address} subscriptions.", limit=max_per_address
                ) from None
            if reasons[2:3] == ["ConditionalCheckFailed"]:
                raise SubscriptionExists() from None
            raise _busy(error) from None

    def of_address(self, address_id: str) -> list[Subscription]:
        items = table_ops.query_prefix(self._client, self._table, keys.address_pk(address_id), keys.SUBSCRIPTION_PREFIX)
        subscriptions = [subscription_from_item(item) for item in items]
        return sorted(subscriptions, key=lambda item: (item.created_at, item.id))

    def get(self, address_id: str, subscription_id: str) -> Subscription | None:
        item = self._client.get_item(
            TableName=self._table, Key=subscription_key(address_id, subscription_id), ConsistentRead=True
        ).get("Item")
        return subscription_from_item(item) if item else None

    def delete(self, address_id: str, subscription_id: str) -> bool:
        head_count = _count_on_head(keys.address_pk(address_id), -1)
        actions = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": subscription_key(address_id, subscription_id),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(keys.address_pk(address_id), keys.SUBSCRIPTION_COUNT),
                    "UpdateExpression": "ADD #n :minus",
                    "ConditionExpression": "attribute_exists(#n)",
                    "ExpressionAttributeNames": {"#n": COUNT},
                    "ExpressionAttributeValues": {":minus": n(-1)},
                }
            },
            # Only on a head still there: the address's deletion removes its subscriptions itself.
            {"Update": {"TableName": self._table, "ConditionExpression": "attribute_exists(pk)", **head_count}},
        ]
        try:
            table_ops.transact_write(self._client, actions)
        except ClientError as error:
            if "ConditionalCheckFailed" in _reasons(error):
                return False
            raise _busy(error) from None
        return True

    def rotate(self, address_id: str, subscription_id: str, secrets: Sequence[SigningSecret]) -> Subscription | None:
        return self._update(
            address_id,
            subscription_id,
            UpdateExpression="SET #secrets = :secrets",
            ConditionExpression="attribute_exists(pk) AND #kind = :webhook",
            ExpressionAttributeNames={"#secrets": SECRETS, "#kind": "kind"},
            ExpressionAttributeValues={":secrets": secrets_value(list(secrets)), ":webhook": s(TargetKind.WEBHOOK)},
        )

    def record_attempts(self, address_id: str, subscription_id: str, attempts: Sequence[Attempt]) -> None:
        self._update(
            address_id,
            subscription_id,
            UpdateExpression="SET #attempts = :attempts",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#attempts": ATTEMPTS},
            ExpressionAttributeValues={":attempts": attempts_value(list(attempts))},
        )

    def note_event(self, address_id: str, subscription_id: str, sequence: int) -> None:
        self._update(
            address_id,
            subscription_id,
            UpdateExpression="SET #through = :seq",
            ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(#through) OR #through < :seq)",
            ExpressionAttributeNames={"#through": THROUGH},
            ExpressionAttributeValues={":seq": n(sequence)},
        )

    def acquire(
        self, address_id: str, subscription_id: str, owner: str, *, now: float, lease_seconds: float
    ) -> Subscription | None:
        return self._update(
            address_id,
            subscription_id,
            UpdateExpression="SET #owner = :owner, #until = :until",
            ConditionExpression="attribute_exists(pk) AND #status = :active"
            " AND (attribute_not_exists(#until) OR #until < :now)"
            " AND (attribute_not_exists(#retry) OR #retry <= :now)",
            ExpressionAttributeNames={
                "#owner": LEASE_OWNER,
                "#until": LEASE_UNTIL,
                "#status": STATUS,
                "#retry": RETRY_AT,
            },
            ExpressionAttributeValues={
                ":owner": s(owner),
                ":until": n(round(now + lease_seconds, 3)),
                ":now": n(round(now, 3)),
                ":active": s(SubscriptionStatus.ACTIVE),
            },
        )

    def advance(self, address_id: str, subscription_id: str, owner: str, progress: Progress) -> bool:
        sets = ["#cursor = :cursor", "#status = :status", "#failures = :failures", "#attempts = :attempts"]
        removes = [] if progress.keep_lease else ["#until", "#owner"]
        values: dict[str, Any] = {
            ":owner": s(owner),
            ":cursor": n(progress.cursor),
            ":status": s(progress.status),
            ":failures": n(progress.failures),
            ":attempts": attempts_value(progress.attempts),
        }
        for name, placeholder, value in (
            ("#retry", ":retry", progress.retry_at),
            ("#since", ":since", progress.failing_since),
        ):
            if value is None:
                removes.append(name)
            else:
                sets.append(f"{name} = {placeholder}")
                values[placeholder] = n(round(value, 3))
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return (
            self._update(
                address_id,
                subscription_id,
                UpdateExpression=expression,
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={
                    "#owner": LEASE_OWNER,
                    "#cursor": CURSOR,
                    "#status": STATUS,
                    "#failures": FAILURES,
                    "#attempts": ATTEMPTS,
                    "#retry": RETRY_AT,
                    "#since": FAILING_SINCE,
                    **({} if progress.keep_lease else {"#until": LEASE_UNTIL}),
                },
                ExpressionAttributeValues=values,
            )
            is not None
        )

    def release(self, address_id: str, subscription_id: str, owner: str, *, cursor: int) -> int | None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=subscription_key(address_id, subscription_id),
                UpdateExpression="SET #cursor = :cursor REMOVE #owner, #until",
                ConditionExpression="#owner = :owner AND (attribute_not_exists(#through) OR #through <= :cursor)",
                ExpressionAttributeNames={
                    "#cursor": CURSOR,
                    "#owner": LEASE_OWNER,
                    "#until": LEASE_UNTIL,
                    "#through": THROUGH,
                },
                ExpressionAttributeValues={":owner": s(owner), ":cursor": n(cursor)},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            old = cast("dict[str, Any]", error.response.get("Item") or {})
            if get_s(old, LEASE_OWNER) != owner:
                return None
            # Still ours: events were noted after the cursor, so the holder keeps going.
            return get_int(old, THROUGH)
        return None

    def schedule(self, address_id: str, subscription_id: str, at: float) -> None:
        self._client.put_item(
            TableName=self._table,
            Item={
                **key(keys.WAKE_DUE_PK, keys.wake_due_sk(at, address_id, subscription_id)),
                "address_id": s(address_id),
                "subscription_id": s(subscription_id),
            },
        )
        if self._scheduled is not None:
            self._scheduled(at)

    def due(self, now: float, limit: int) -> list[DueRetry]:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk < :upper",
            ExpressionAttributeValues={":pk": s(keys.WAKE_DUE_PK), ":upper": s(keys.due_upper_bound(now))},
            Limit=limit,
        )
        return [
            DueRetry(get_s(item, "address_id") or "", get_s(item, "subscription_id") or "", get_s(item, "sk") or "")
            for item in response.get("Items", [])
        ]

    def done(self, due: DueRetry) -> None:
        self._client.delete_item(TableName=self._table, Key=key(keys.WAKE_DUE_PK, due.token))

    def _update(self, address_id: str, subscription_id: str, **params: Any) -> Subscription | None:
        """The item after a conditional update; None when the condition fails."""
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=subscription_key(address_id, subscription_id),
                ReturnValues="ALL_NEW",
                **params,
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return subscription_from_item(response["Attributes"])


def _count_action(pk: str, max_per_address: int, expires_at: float | None) -> dict[str, Any]:
    """One more subscription on the address's count, refused at `max_per_address`.

    The count goes with its address: deleting it removes the count, and an
    address that expires takes it along by the same TTL, as it does its subscriptions.
    """
    update: dict[str, Any] = {
        "Key": key(pk, keys.SUBSCRIPTION_COUNT),
        "UpdateExpression": "ADD #n :one",
        "ConditionExpression": "attribute_not_exists(#n) OR #n < :max",
        "ExpressionAttributeNames": {"#n": COUNT},
        "ExpressionAttributeValues": {":one": n(1), ":max": n(max_per_address)},
    }
    if expires_at is not None:
        update["UpdateExpression"] += " SET expires_at = :expires"
        update["ExpressionAttributeValues"][":expires"] = n(int(expires_at))
    return update


def _count_on_head(pk: str, change: int) -> dict[str, Any]:
    """An update of the head's subscription count by `change` (a head that never counted stays uncounted)."""
    return {
        "Key": key(pk, keys.META),
        "UpdateExpression": "SET #subscribers = if_not_exists(#subscribers, :uncounted) + :change",
        "ExpressionAttributeNames": {"#subscribers": SUBSCRIBERS},
        "ExpressionAttributeValues": {":uncounted": n(UNCOUNTED_SUBSCRIBERS), ":change": n(change)},
    }


def _reasons(error: ClientError) -> list[str | None]:
    return [reason.get("Code") for reason in cancellation_reasons(error)]


def _busy(error: ClientError) -> Exception:
    """A transaction cancelled by contention is retryable (503), like any busy store; other errors stay."""
    return Unavailable() if error_code(error) == "TransactionCanceledException" else error
