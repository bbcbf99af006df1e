"""Contacts of addresses in the single table (`ContactStore`).

Every write is one transaction whose first action requires the address to
be live, so a request racing the address's deletion writes nothing under
it. A code is stored in the transaction that counts it (per address and
per recipient per UTC day) and notes when it was mailed (per address and
recipient), so a refused request stores nothing and no count lives on the
contact, where removing it would reset it. A new contact and the address's
contact count move together (`contacts < :max`). A try at a code is
conditioned on the code and its attempts as read and counts the guess in
the same transaction, so parallel guesses get no more tries than
sequential ones.
"""

from __future__ import annotations

import math
import random
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.dynamodb import keys, outbound_items, table_ops
from cairn.dynamodb.items import cancellation_reasons, error_code
from cairn.email.outbound_ports import CodeLimits, Contact, ContactMoved, PendingCode
from cairn.errors import ContactLimitReached, RateLimited, Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailed"
# Reasons a transaction can be cancelled for that asking again may cure.
_TRANSIENT = frozenset({"None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
# Transactions lost to another writer of the same items (an append holds the head for a moment).
_CONFLICT_ATTEMPTS = 8


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
        new: bool,
        now: float,
        address_expires_at: float | None,
        limits: CodeLimits,
    ) -> None:
        table = self._table
        actions = {
            "address": outbound_items.live_address_check(table, address_id, now=now),
            "contact": (
                outbound_items.new_contact_action(
                    table, address_id, email, code, now=now, address_expires_at=address_expires_at
                )
                if new
                else outbound_items.new_code_action(table, address_id, email, code)
            ),
            "resend": outbound_items.resend_action(table, address_id, email, limits=limits, now=now),
            "address_codes": outbound_items.address_codes_action(table, address_id, limits=limits, now=now),
            "recipient_codes": outbound_items.recipient_codes_action(table, email, limits=limits, now=now),
        }
        if new:
            actions["contacts"] = outbound_items.contact_count_action(
                table, address_id, delta=1, limit=limits.max_contacts, address_expires_at=address_expires_at
            )
        failed = self._transact(actions)
        # In the order a caller can act on: a contact as it is now answers before any limit does.
        if "address" in failed:
            raise Unauthorized()
        if "contact" in failed:
            raise ContactMoved()
        if "contacts" in failed:
            raise ContactLimitReached(
                f"This address has the maximum of {limits.max_contacts} contacts; remove one first.",
                max_contacts=limits.max_contacts,
            )
        if "resend" in failed:
            wait = outbound_items.last_sent(failed["resend"]) + limits.resend_seconds - now
            raise RateLimited(
                "A code was sent to this email moments ago; wait before asking again.",
                retry_after=max(1, math.ceil(wait)),
            )
        if "address_codes" in failed:
            raise RateLimited(
                "This address has mailed its maximum of codes for today (UTC).",
                retry_after=outbound_items.seconds_to_next_day(now),
            )
        if "recipient_codes" in failed:
            raise RateLimited(
                "This email has been sent its maximum of codes for today (UTC), from any address.",
                retry_after=outbound_items.seconds_to_next_day(now),
            )

    def try_code(
        self, address_id: str, email: str, seen: PendingCode, *, matched: bool, now: float, limits: CodeLimits
    ) -> None:
        table = self._table
        failed = self._transact(
            {
                "address": outbound_items.live_address_check(table, address_id, now=now),
                "contact": outbound_items.try_code_action(
                    table, address_id, email, seen, matched=matched, limits=limits, now=now
                ),
                "address_guesses": outbound_items.address_guesses_action(table, address_id, limits=limits, now=now),
                "recipient_guesses": outbound_items.recipient_guesses_action(table, email, limits=limits, now=now),
            }
        )
        if "address" in failed:
            raise Unauthorized()
        if "contact" in failed:
            raise ContactMoved()
        if "address_guesses" in failed:
            raise RateLimited(
                "This address has spent its tries at codes for today (UTC).",
                retry_after=outbound_items.seconds_to_next_day(now),
            )
        if "recipient_guesses" in failed:
            raise RateLimited(
                "The tries at this email's codes are spent for today (UTC), from any address.",
                retry_after=outbound_items.seconds_to_next_day(now),
            )

    def remove(self, address_id: str, email: str, *, now: float) -> bool:
        failed = self._transact(
            {
                "address": outbound_items.live_address_check(self._table, address_id, now=now),
                "contact": outbound_items.remove_contact_action(self._table, address_id, email),
                "contacts": outbound_items.contact_count_action(
                    self._table, address_id, delta=-1, limit=None, address_expires_at=None
                ),
            }
        )
        if "address" in failed:
            raise Unauthorized()
        return "contact" not in failed

    def _transact(self, actions: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
        """Run the named actions as one transaction; the names whose condition failed, with the item returned.

        Empty when it committed. A transaction lost to another writer (no
        condition failed) is tried again after a growing random pause.
        """
        names = list(actions)
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                table_ops.transact_write(self._client, list(actions.values()))
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(error)
                failed = {
                    name: reason.get("Item")
                    for name, reason in zip(names, reasons, strict=False)
                    if reason.get("Code") == _FAILED
                }
                if failed:
                    return failed
                if any(reason.get("Code") not in _TRANSIENT for reason in reasons):
                    raise
                time.sleep(random.uniform(0, 0.001 * min(2**attempt, 50)))
                continue
            return {}
        raise Unavailable("The address is too busy right now; retry shortly.")
