"""Contacts of addresses in the single table (`ContactStore`).

A new contact and the address's contact count move together in one
transaction (`contacts < :max`), so racing additions never pass the limit.
Attempts at a code are spent with a conditional `ADD` before the code is
compared, so parallel guesses get no more tries than sequential ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.dynamodb import keys, outbound_items, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code, get_n, n, s
from cairn.dynamodb.outbound_items import ATTEMPTS, CODE_DIGEST, CODE_FIELDS, CONTACT_COUNT, STATUS
from cairn.email.outbound_ports import Contact, ContactVerified, PendingCode
from cairn.errors import CodeExpired, ContactLimitReached, RateLimited, TooManyAttempts, UnknownRecipient

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailedException"


class ContactTable:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def list(self, address_id: str) -> list[Contact]:
        items = table_ops.query_prefix(self._client, self._table, keys.address_pk(address_id), keys.CONTACT_PREFIX)
        contacts = [outbound_items.contact_from_item(item) for item in items]
        return sorted(contacts, key=lambda contact: (contact.created_at, contact.email))

    def get(self, address_id: str, email: str) -> tuple[Contact, PendingCode | None] | None:
        response = self._client.get_item(
            TableName=self._table, Key=outbound_items.contact_key(address_id, email), ConsistentRead=True
        )
        item = response.get("Item")
        if not item:
            return None
        return outbound_items.contact_from_item(item), outbound_items.code_from_item(item)

    def put_code(
        self,
        address_id: str,
        email: str,
        code: PendingCode,
        *,
        now: float,
        address_expires_at: float | None,
        max_contacts: int,
        resend_after: float,
    ) -> None:
        if self._replace_code(address_id, email, code, resend_after=resend_after):
            return
        item = outbound_items.pending_contact_item(
            address_id, email, code, now=now, address_expires_at=address_expires_at
        )
        update = "ADD #count :one"
        values = {":one": n(1), ":max": n(max_contacts)}
        if address_expires_at is not None:
            update += " SET expires_at = :expires"
            values[":expires"] = n(int(address_expires_at))
        counter = {
            "Update": {
                "TableName": self._table,
                "Key": outbound_items.counter_key(address_id),
                "UpdateExpression": update,
                "ConditionExpression": "attribute_not_exists(#count) OR #count < :max",
                "ExpressionAttributeNames": {"#count": CONTACT_COUNT},
                "ExpressionAttributeValues": values,
            }
        }
        put = {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
        try:
            table_ops.transact_write(self._client, [counter, put])
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            reasons = cancellation_reasons(error)
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                raise ContactLimitReached(
                    f"This address has the maximum of {max_contacts} contacts; remove one first.",
                    max_contacts=max_contacts,
                ) from error
            # Created meanwhile by a racing request: replace its code as a resend would.
            if not self._replace_code(address_id, email, code, resend_after=resend_after):
                raise RateLimited("A code was just sent to this contact.", retry_after=1) from error

    def _replace_code(self, address_id: str, email: str, code: PendingCode, *, resend_after: float) -> bool:
        """Give an existing pending contact a new code; False when there is no contact."""
        values = outbound_items.code_values(code)
        names = {f"#{index}": name for index, name in enumerate(CODE_FIELDS)}
        assignments = ", ".join(f"#{index} = :{index}" for index in range(len(CODE_FIELDS)))
        try:
            self._client.update_item(
                TableName=self._table,
                Key=outbound_items.contact_key(address_id, email),
                UpdateExpression=f"SET {assignments}",
                ConditionExpression="attribute_exists(pk) AND #status = :pending AND code_sent_at <= :resend",
                ExpressionAttributeNames={**names, "#status": STATUS},
                ExpressionAttributeValues={
                    **{f":{index}": values[name] for index, name in enumerate(CODE_FIELDS)},
                    ":pending": s("pending"),
                    ":resend": n(round(resend_after, 3)),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != _FAILED:
                raise
            old = _old_item(error)
            if not old:
                return False
            if old.get(STATUS, {}).get("S") == "verified":
                raise ContactVerified() from error
            sent_at = get_n(old, "code_sent_at") or 0.0
            wait = max(1, int(sent_at - resend_after) + 1)
            raise RateLimited(
                "A code was sent to this contact moments ago; wait before asking again.", retry_after=wait
            ) from error
        return True

    def spend_attempt(self, address_id: str, email: str, *, now: float, max_attempts: int) -> PendingCode:
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=outbound_items.contact_key(address_id, email),
                UpdateExpression="ADD #attempts :one",
                ConditionExpression="#status = :pending AND #attempts < :max AND code_expires_at > :now",
                ExpressionAttributeNames={"#attempts": ATTEMPTS, "#status": STATUS},
                ExpressionAttributeValues={
                    ":one": n(1),
                    ":pending": s("pending"),
                    ":max": n(max_attempts),
                    ":now": n(round(now, 3)),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != _FAILED:
                raise
            old = _old_item(error)
            if not old:
                raise UnknownRecipient("No contact with this email; ask for a code first.") from error
            code = outbound_items.code_from_item(old)
            if code is None:
                raise ContactVerified() from error
            if code.attempts >= max_attempts:
                raise TooManyAttempts(
                    f"All {max_attempts} attempts at this code are used; ask for a new code.",
                    max_attempts=max_attempts,
                ) from error
            raise CodeExpired("The code has expired; ask for a new one.") from error
        code = outbound_items.code_from_item(response["Attributes"])
        assert code is not None  # the condition held: the contact is pending
        return code

    def mark_verified(self, address_id: str, email: str, code_digest: str, *, now: float) -> Contact | None:
        removed = ", ".join(f"#{index}" for index in range(len(CODE_FIELDS)))
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=outbound_items.contact_key(address_id, email),
                UpdateExpression=f"SET #status = :verified, verified_at = :now REMOVE {removed}",
                ConditionExpression="#digest = :digest",
                ExpressionAttributeNames={
                    **{f"#{index}": name for index, name in enumerate(CODE_FIELDS)},
                    "#status": STATUS,
                    "#digest": CODE_DIGEST,
                },
                ExpressionAttributeValues={
                    ":verified": s("verified"),
                    ":now": n(round(now, 3)),
                    ":digest": s(code_digest),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if error_code(error) == _FAILED:
                return None
            raise
        return outbound_items.contact_from_item(response["Attributes"])

    def remove(self, address_id: str, email: str) -> bool:
        delete = {
            "Delete": {
                "TableName": self._table,
                "Key": outbound_items.contact_key(address_id, email),
                "ConditionExpression": "attribute_exists(pk)",
            }
        }
        counter = {
            "Update": {
                "TableName": self._table,
                "Key": outbound_items.counter_key(address_id),
                "UpdateExpression": "ADD #count :minus",
                "ExpressionAttributeNames": {"#count": CONTACT_COUNT},
                "ExpressionAttributeValues": {":minus": n(-1)},
            }
        }
        try:
            table_ops.transact_write(self._client, [delete, counter])
        except ClientError as error:
            reasons = cancellation_reasons(error)
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise
        return True


def _old_item(error: ClientError) -> dict[str, Any] | None:
    """The item a failed condition found (`ReturnValuesOnConditionCheckFailure=ALL_OLD`)."""
    item = error.response.get("Item")
    return item if isinstance(item, dict) else None
