"""Outbound mail as items: contacts with their code digests, the contact count, the daily send count.

The only place that knows these attribute names. Contacts and the count
live in the address's partition, so deleting the address removes them;
they carry the address's expiry, so TTL reclaims them with it.
"""

from __future__ import annotations

from typing import Any

from cairn.dynamodb import keys
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.email.outbound_ports import Contact, ContactStatus, PendingCode

Item = dict[str, Any]

DAY_SECONDS = 86_400
SEND_SCOPE = "send"
CONTACT_COUNT = "contacts"
STATUS = "status"
ATTEMPTS = "code_attempts"
CODE_DIGEST = "code_digest"
CODE_FIELDS = ("code_salt", CODE_DIGEST, "code_expires_at", "code_sent_at", ATTEMPTS)
# On an `email.sent` event item: the hand-off to the carrier, leased, then done.
HANDOFF_LEASE = "handoff_lease"
HANDED_OFF_AT = "handed_off_at"
HANDOFF_OUTCOME = "handoff_outcome"
PROVIDER_MESSAGE_ID = "provider_message_id"


def seconds_to_next_day(now: float) -> int:
    """Seconds until the next UTC midnight, at least one."""
    return max(1, (int(now) // DAY_SECONDS + 1) * DAY_SECONDS - int(now))


def send_count_action(table: str, address_id: str, *, limit: int, now: float) -> Item:
    """Count one send in today's window, refused past `limit` (a transaction action)."""
    day = int(now) // DAY_SECONDS
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.rate_pk(SEND_SCOPE, address_id), keys.rate_sk(day)),
            "UpdateExpression": "ADD hits :one SET expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(hits) OR hits < :limit",
            "ExpressionAttributeValues": {
                ":one": n(1),
                ":limit": n(limit),
                ":expires": n((day + 2) * DAY_SECONDS),
            },
        }
    }


def contact_key(address_id: str, email: str) -> Item:
    return key(keys.address_pk(address_id), keys.contact_sk(email))


def counter_key(address_id: str) -> Item:
    return key(keys.address_pk(address_id), keys.OUTBOUND)


def pending_contact_item(
    address_id: str, email: str, code: PendingCode, *, now: float, address_expires_at: float | None
) -> Item:
    item = {
        **contact_key(address_id, email),
        "email": s(email),
        STATUS: s("pending"),
        "created_at": n(round(now, 3)),
        **code_values(code),
    }
    if address_expires_at is not None:
        item["expires_at"] = n(int(address_expires_at))
    return item


def code_values(code: PendingCode) -> Item:
    return {
        "code_salt": s(code.salt),
        CODE_DIGEST: s(code.digest),
        "code_expires_at": n(round(code.expires_at, 3)),
        "code_sent_at": n(round(code.sent_at, 3)),
        ATTEMPTS: n(code.attempts),
    }


def contact_from_item(item: Item) -> Contact:
    status: ContactStatus = "verified" if get_s(item, STATUS) == "verified" else "pending"
    return Contact(
        email=get_s(item, "email") or "",
        status=status,
        created_at=get_n(item, "created_at") or 0.0,
        verified_at=get_n(item, "verified_at"),
    )


def code_from_item(item: Item) -> PendingCode | None:
    if get_s(item, STATUS) == "verified" or CODE_DIGEST not in item:
        return None
    return PendingCode(
        salt=get_s(item, "code_salt") or "",
        digest=get_s(item, CODE_DIGEST) or "",
        expires_at=get_n(item, "code_expires_at") or 0.0,
        sent_at=get_n(item, "code_sent_at") or 0.0,
        attempts=get_int(item, ATTEMPTS),
    )
