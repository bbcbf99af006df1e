"""Outbound mail as items: contacts with their code digests, the contact count, the daily counts.

The only place that knows these attribute names. Contacts and the count
live in the address's partition, so deleting the address removes them;
they carry the address's expiry, so TTL reclaims them with it. What bounds
codes and guesses lives outside it, under `RL#` keys that expire by TTL
after their day, so removing a contact (or the address) resets nothing:
codes and guesses per address and per recipient (the digest of its email,
counted over every address) per UTC day, and when the address last mailed
a code to the recipient.
"""

from __future__ import annotations

import math
from typing import Any

from cairn import credentials
from cairn.dynamodb import keys
from cairn.dynamodb.address_items import DELETED
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.email.outbound_ports import CodeLimits, Contact, ContactStatus, PendingCode

Item = dict[str, Any]

DAY_SECONDS = 86_400
SEND_SCOPE = "send"
# Per address and UTC day: codes mailed (`hits`, the name the per-address count had before guesses were
# counted beside it) and guesses.
VERIFY_SCOPE = "verify"
# The same per recipient, over every address.
RECIPIENT_SCOPE = "verify-to"
# Per address and recipient: when the last code was mailed.
RESEND_SCOPE = "verify-resend"
CODES = "hits"
GUESSES = "guesses"
SENT_AT = "sent_at"
CONTACT_COUNT = "contacts"
STATUS = "status"
ATTEMPTS = "code_attempts"
CODE_DIGEST = "code_digest"
CODE_SALT = "code_salt"
CODE_EXPIRES = "code_expires_at"
CODE_SENT_AT = "code_sent_at"
CODE_FIELDS = (CODE_SALT, CODE_DIGEST, CODE_EXPIRES, CODE_SENT_AT, ATTEMPTS)
# On an `email.sent` event item: the hand-off to the carrier, leased, then done.
HANDOFF_LEASE = "handoff_lease"
HANDED_OFF_AT = "handed_off_at"
HANDOFF_OUTCOME = "handoff_outcome"
PROVIDER_MESSAGE_ID = "provider_message_id"
# Which hand-off attempt the three above are of, absent for the first: a retry after a refused
# hand-off opens the next.
HANDOFF_ATTEMPT = "handoff_attempt"


def seconds_to_next_day(now: float) -> int:
    """Seconds until the next UTC midnight, at least one."""
    return max(1, (int(now) // DAY_SECONDS + 1) * DAY_SECONDS - int(now))


def send_count_action(table: str, address_id: str, *, limit: int, now: float) -> Item:
    """Count one send in today's window, refused past `limit` (a transaction action)."""
    return _day_count_action(table, SEND_SCOPE, address_id, "hits", limit=limit, now=now)


def _day_count_action(table: str, scope: str, subject: str, attribute: str, *, limit: int, now: float) -> Item:
    """Count one in `attribute` of today's window of `scope`/`subject`, refused at `limit`."""
    day = int(now) // DAY_SECONDS
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.rate_pk(scope, subject), keys.rate_sk(day)),
            "UpdateExpression": "ADD #count :one SET expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(#count) OR #count < :limit",
            "ExpressionAttributeNames": {"#count": attribute},
            "ExpressionAttributeValues": {
                ":one": n(1),
                ":limit": n(limit),
                ":expires": n((day + 2) * DAY_SECONDS),
            },
        }
    }


def live_address_check(table: str, address_id: str, *, now: float) -> Item:
    """The address exists, is not being deleted and has not expired: the condition of every contact write."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key(keys.address_pk(address_id), keys.META),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#deleted)"
            " AND (attribute_not_exists(expires_at) OR expires_at > :now)",
            "ExpressionAttributeNames": {"#deleted": DELETED},
            "ExpressionAttributeValues": {":now": n(int(now))},
        }
    }


def _recipient(email: str) -> str:
    # A digest: the email itself is kept only under the addresses that know it.
    return credentials.digest(email)


def address_codes_action(table: str, address_id: str, *, limits: CodeLimits, now: float) -> Item:
    return _day_count_action(table, VERIFY_SCOPE, address_id, CODES, limit=limits.codes_per_address, now=now)


def recipient_codes_action(table: str, email: str, *, limits: CodeLimits, now: float) -> Item:
    return _day_count_action(
        table, RECIPIENT_SCOPE, _recipient(_mailbox(email)), CODES, limit=limits.codes_per_recipient, now=now
    )


def _mailbox(email: str) -> str:
    """The mailbox `email` is delivered to: `ada+1@x` and `ada+2@x` are both `ada@x`.

    The daily bound on codes is a person's, not an address string's: counted
    by the string, each `+tag` brought ten more code mails to one inbox.
    """
    local, _, domain = email.lower().rpartition("@")
    return f"{local.partition('+')[0]}@{domain}"


def address_guesses_action(table: str, address_id: str, *, limits: CodeLimits, now: float) -> Item:
    return _day_count_action(table, VERIFY_SCOPE, address_id, GUESSES, limit=limits.guesses_per_address, now=now)


def recipient_guesses_action(table: str, email: str, *, limits: CodeLimits, now: float) -> Item:
    return _day_count_action(
        table, RECIPIENT_SCOPE, _recipient(email), GUESSES, limit=limits.guesses_per_recipient, now=now
    )


def resend_action(table: str, address_id: str, email: str, *, limits: CodeLimits, now: float) -> Item:
    """Note a code mailed now, refused within `resend_seconds` of the last; a refusal returns the last time."""
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.rate_pk(RESEND_SCOPE, f"{address_id}#{_recipient(email)}"), keys.RATE_LAST),
            "UpdateExpression": "SET #sent = :now, expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(#sent) OR #sent <= :resend",
            "ExpressionAttributeNames": {"#sent": SENT_AT},
            "ExpressionAttributeValues": {
                ":now": n(round(now, 3)),
                ":resend": n(round(now - limits.resend_seconds, 3)),
                # Past this it decides nothing: TTL may take it.
                ":expires": n(math.ceil(now) + limits.resend_seconds),
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def last_sent(item: Item | None) -> float:
    return (get_n(item, SENT_AT) if item else None) or 0.0


def contact_count_action(
    table: str, address_id: str, *, delta: int, limit: int | None, address_expires_at: float | None
) -> Item:
    """Move the address's contact count; with `limit`, refused when it is reached."""
    update = "ADD #count :delta"
    values = {":delta": n(delta)}
    if address_expires_at is not None:
        update += " SET expires_at = :expires"
        values[":expires"] = n(int(address_expires_at))
    action: Item = {
        "TableName": table,
        "Key": counter_key(address_id),
        "UpdateExpression": update,
        "ExpressionAttributeNames": {"#count": CONTACT_COUNT},
        "ExpressionAttributeValues": values,
    }
    if limit is not None:
        action["ConditionExpression"] = "attribute_not_exists(#count) OR #count < :max"
        values[":max"] = n(limit)
    return {"Update": action}


def new_contact_action(
    table: str, address_id: str, email: str, code: PendingCode, *, now: float, address_expires_at: float | None
) -> Item:
    item = pending_contact_item(address_id, email, code, now=now, address_expires_at=address_expires_at)
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def new_code_action(table: str, address_id: str, email: str, code: PendingCode) -> Item:
    """Replace the code of a contact that is still pending."""
    values = code_values(code)
    names = {f"#{index}": name for index, name in enumerate(CODE_FIELDS)}
    assignments = ", ".join(f"#{index} = :{index}" for index in range(len(CODE_FIELDS)))
    return {
        "Update": {
            "TableName": table,
            "Key": contact_key(address_id, email),
            "UpdateExpression": f"SET {assignments}",
            "ConditionExpression": "#status = :pending",
            "ExpressionAttributeNames": {**names, "#status": STATUS},
            "ExpressionAttributeValues": {
                **{f":{index}": values[name] for index, name in enumerate(CODE_FIELDS)},
                ":pending": s("pending"),
            },
        }
    }


def try_code_action(
    table: str, address_id: str, email: str, seen: PendingCode, *, matched: bool, limits: CodeLimits, now: float
) -> Item:
    """Spend the attempt after `seen.attempts` on the code `seen`; when `matched`, verify the contact instead.

    The condition pins the code and its attempts as read, so racing tries
    are taken one at a time and no code gets more tries than it allows.
    """
    names = {"#status": STATUS, "#digest": CODE_DIGEST, "#attempts": ATTEMPTS, "#expires": CODE_EXPIRES}
    values = {
        ":pending": s("pending"),
        ":digest": s(seen.digest),
        ":seen": n(seen.attempts),
        ":max": n(limits.attempts),
        ":now": n(round(now, 3)),
    }
    if matched:
        names.update({"#salt": CODE_SALT, "#sent": CODE_SENT_AT})
        update = "SET #status = :verified, verified_at = :now REMOVE #salt, #digest, #expires, #sent, #attempts"
        values[":verified"] = s("verified")
    else:
        update = "ADD #attempts :one"
        values[":one"] = n(1)
    return {
        "Update": {
            "TableName": table,
            "Key": contact_key(address_id, email),
            "UpdateExpression": update,
            "ConditionExpression": "#status = :pending AND #digest = :digest AND #attempts = :seen AND #attempts < :max"
            " AND #expires > :now",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def remove_contact_action(table: str, address_id: str, email: str) -> Item:
    return {
        "Delete": {
            "TableName": table,
            "Key": contact_key(address_id, email),
            "ConditionExpression": "attribute_exists(pk)",
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
        CODE_SALT: s(code.salt),
        CODE_DIGEST: s(code.digest),
        CODE_EXPIRES: n(round(code.expires_at, 3)),
        CODE_SENT_AT: n(round(code.sent_at, 3)),
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
        salt=get_s(item, CODE_SALT) or "",
        digest=get_s(item, CODE_DIGEST) or "",
        expires_at=get_n(item, CODE_EXPIRES) or 0.0,
        sent_at=get_n(item, CODE_SENT_AT) or 0.0,
        attempts=get_int(item, ATTEMPTS),
    )
