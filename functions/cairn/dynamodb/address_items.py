"""Address heads, events and idempotency claims as items, and back.

The only place that knows the attribute names of these items; the
credential kinds of `cairn.addresses.ports` map to head attributes here.
"""

from __future__ import annotations

import hmac
from typing import Any

from cairn.addresses.inbox_settings import InboxSettings, Verifier
from cairn.addresses.models import AddressRecord, Event, EventRef, IdempotencyClaim, NewEvent, legacy_surface
from cairn.addresses.ports import CredentialKind
from cairn.dynamodb import blobs, feed_counts, keys
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s

Item = dict[str, Any]

CREDENTIAL_ATTRIBUTES = {
    CredentialKind.READ_TOKEN: "read_token_digest",
    CredentialKind.INBOX_SECRET: "inbox_secret_digest",
}
READ_TOKEN = CREDENTIAL_ATTRIBUTES[CredentialKind.READ_TOKEN]
LAST_SEQUENCE = "last_seq"
# Feed slots held for outbound mail outcomes not yet recorded.
PENDING_OUTCOMES = "pending_outcomes"
# The head's count of wake-up subscriptions, moved by the transactions that create and delete them.
SUBSCRIBERS = "subscribers"
# Heads written before subscriptions were counted there take this on their first subscription
# change: their count is unknown, and a count this high never reads as none.
UNCOUNTED_SUBSCRIBERS = 1_000_000_000
# On an event appended while its head counted no subscription (a condition of the append), so
# the wake-up dispatcher knows without reading that nobody is owed it.
UNSUBSCRIBED = "unsubscribed"
INGRESS_SURFACE = "ingress_surface"
CONTENT_TYPE = "content_type"
HEADERS = "headers"
VERIFIED_BY = "verified_by"
DELETED = "deleted"
TRIMMED_THROUGH = "trimmed_through"
INBOX_REVISION = "inbox_rev"
_KEEP_HEADERS = "inbox_keep_headers"
# Compared against when there is no head, so a refusal for an unknown address costs what a wrong token does.
_NO_HEAD_DIGEST = "0" * 64
_VERIFIERS = "inbox_verifiers"
# A verifier's secret: sealed (by the server secret), or as given by one registered before secrets were sealed.
_SEALED_SECRET = "sealed_secret"
_SECRET = "secret"


def head_item(record: AddressRecord) -> Item:
    item = {
        **key(keys.address_pk(record.id), keys.META),
        "address_id": s(record.id),
        "email": s(record.email),
        "created_at": n(record.created_at),
        READ_TOKEN: s(record.read_token_digest),
        CREDENTIAL_ATTRIBUTES[CredentialKind.INBOX_SECRET]: s(record.inbox_secret_digest),
        LAST_SEQUENCE: n(0),
        SUBSCRIBERS: n(0),
        feed_counts.COUNTED: {"BOOL": True},
    }
    if record.task_id is not None:
        item["task_id"] = s(record.task_id)
    if record.name is not None:
        item["name"] = s(record.name)
    if record.expires_at is not None:
        item["expires_at"] = n(int(record.expires_at))
    if record.inbox.revision:
        item.update(inbox_attributes(record.inbox))
    return item


def head_opens(item: Item | None, digest: str, *, now: float) -> bool:
    """Whether a head item (None: none) is live and its read token has this digest.

    The digests are compared in constant time whatever the head holds, so a
    refusal costs the same for every reason.
    """
    stored = (get_s(item, READ_TOKEN) if item else None) or _NO_HEAD_DIGEST
    opens = hmac.compare_digest(digest, stored)
    if item is None or DELETED in item:
        return False
    expires_at = get_n(item, "expires_at")
    return opens and (expires_at is None or expires_at > int(now))


def inbox_attributes(settings: InboxSettings) -> Item:
    """The head attributes of an inbox's settings; verifier secrets as the settings hold them (sealed)."""
    verifiers = {
        verifier.kind: {
            "M": {
                _SEALED_SECRET if verifier.sealed else _SECRET: s(verifier.secret),
                "created_at": n(verifier.created_at),
                **({} if verifier.tolerance_s is None else {"tolerance_s": n(verifier.tolerance_s)}),
            }
        }
        for verifier in settings.verifiers
    }
    return {
        INBOX_REVISION: n(settings.revision),
        _KEEP_HEADERS: {"L": [s(name) for name in settings.keep_headers]},
        _VERIFIERS: {"M": verifiers},
    }


def inbox_from_item(item: Item) -> InboxSettings:
    """The inbox settings a head item holds; the defaults (revision 0) when it holds none."""
    if INBOX_REVISION not in item:
        return InboxSettings()
    verifiers = tuple(
        Verifier(
            kind=kind,
            secret=get_s(value["M"], _SEALED_SECRET) or get_s(value["M"], _SECRET) or "",
            sealed=_SEALED_SECRET in value["M"],
            tolerance_s=None if "tolerance_s" not in value["M"] else get_int(value["M"], "tolerance_s"),
            created_at=get_n(value["M"], "created_at") or 0.0,
        )
        for kind, value in item.get(_VERIFIERS, {"M": {}})["M"].items()
    )
    return InboxSettings(
        keep_headers=tuple(name["S"] for name in item.get(_KEEP_HEADERS, {"L": []})["L"]),
        verifiers=tuple(sorted(verifiers, key=lambda verifier: verifier.created_at)),
        revision=get_int(item, INBOX_REVISION),
    )


def record_from_item(item: Item) -> AddressRecord | None:
    """The address a head item describes; None for a deleted one."""
    if DELETED in item:
        return None
    return AddressRecord(
        id=get_s(item, "address_id") or "",
        task_id=get_s(item, "task_id"),
        name=get_s(item, "name"),
        email=get_s(item, "email") or "",
        created_at=get_n(item, "created_at") or 0.0,
        expires_at=get_n(item, "expires_at"),
        read_token_digest=get_s(item, READ_TOKEN) or "",
        inbox_secret_digest=get_s(item, CREDENTIAL_ATTRIBUTES[CredentialKind.INBOX_SECRET]) or "",
        last_sequence=get_int(item, LAST_SEQUENCE),
        trimmed_through=get_int(item, TRIMMED_THROUGH),
        inbox=inbox_from_item(item),
    )


def event_items(
    address_id: str, ref: EventRef, event: NewEvent, *, now: float, expires_at: int, unsubscribed: bool = False
) -> list[Item]:
    """The event item, then the pieces of data too large to sit inside it."""
    pk = keys.address_pk(address_id)
    sk = keys.event_sk(ref.sequence)
    payload, chunks = blobs.split(pk, sk, event.data_json.encode(), text=True, expires_at=n(expires_at))
    item = {
        **key(pk, sk),
        "event_id": s(ref.id),
        "seq": n(ref.sequence),
        "type": s(event.type),
        "source": s(event.source),
        INGRESS_SURFACE: s(event.ingress_surface),
        "created_at": n(round(now, 3)),
        "expires_at": n(expires_at),
        **payload,
    }
    if event.content_type is not None:
        item[CONTENT_TYPE] = s(event.content_type)
    if event.headers:
        item[HEADERS] = {"M": {name: s(value) for name, value in event.headers.items()}}
    if event.verified_by is not None:
        item[VERIFIED_BY] = s(event.verified_by)
    if unsubscribed:
        item[UNSUBSCRIBED] = {"BOOL": True}
    return [item, *chunks]


def event_from_item(item: Item, data_json: str | None) -> Event:
    """An event item with its data (read by the caller: it may live in pieces)."""
    type_ = get_s(item, "type") or ""
    source = get_s(item, "source") or ""
    return Event(
        id=get_s(item, "event_id") or "",
        sequence=get_int(item, "seq"),
        type=type_,
        source=source,
        data_json=data_json or "null",
        created_at=get_n(item, "created_at") or 0.0,
        expires_at=get_n(item, "expires_at") or 0.0,
        # Items written before surfaces existed have none.
        ingress_surface=get_s(item, INGRESS_SURFACE) or legacy_surface(type_, source),
        acknowledged_at=get_n(item, "acknowledged_at"),
        content_type=get_s(item, CONTENT_TYPE),
        headers={name: value["S"] for name, value in item[HEADERS]["M"].items()} if HEADERS in item else None,
        verified_by=get_s(item, VERIFIED_BY),
    )


def claim_item(address_id: str, claim: IdempotencyClaim, first: EventRef, *, expires_at: int) -> Item:
    return {
        **key(keys.address_pk(address_id), keys.idempotency_sk(claim.key_digest)),
        "request_digest": s(claim.request_digest),
        "event_id": s(first.id),
        "seq": n(first.sequence),
        "expires_at": n(expires_at),
    }


def claimed_ref(item: Item) -> EventRef:
    """The event an idempotency claim item points to."""
    return EventRef(id=get_s(item, "event_id") or "", sequence=get_int(item, "seq"))


def claimed_request(item: Item) -> str:
    return get_s(item, "request_digest") or ""
