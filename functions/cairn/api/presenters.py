"""Domain objects as the answer models of `schemas`.

Routes return these models, so the body an answer carries and the schema
OpenAPI publishes for it are one definition and cannot drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn import jsontext
from cairn.addresses.inbox_settings import InboxSettings
from cairn.addresses.models import Acknowledged, AddressRecord, AppendResult, Event, FeedPage, TrimResult
from cairn.addresses.provisioning import AddressOverview, Provisioned
from cairn.addresses.state import StateWrite
from cairn.addresses.state_model import StateEntry, StateUsage
from cairn.api import schemas, urls
from cairn.clock import iso
from cairn.settings import Settings

if TYPE_CHECKING:
    from cairn.email.contacts import ContactChange
    from cairn.email.outbound_ports import Contact
    from cairn.email.sending import SendResult


def address(record: AddressRecord) -> schemas.AddressOut:
    expires = None if record.expires_at is None else iso(record.expires_at)
    return schemas.AddressOut(
        id=record.id,
        task_id=record.task_id,
        name=record.name,
        email=record.email,
        created_at=iso(record.created_at),
        expires_at=expires,
        expiresAt=expires,
    )


def provisioned(created: Provisioned, base: str) -> schemas.ProvisionResponse:
    """The answer to provisioning: the one time the read token and the inbox URL are shown."""
    return schemas.ProvisionResponse(
        address=address(created.record),
        credentials=schemas.CredentialsOut(read_token=created.read_token),
        endpoints=schemas.EndpointsOut(**urls.endpoints(base, created.record.id, created.inbox_secret)),
    )


def overview(described: AddressOverview, base: str, settings: Settings) -> schemas.AddressDetailResponse:
    record = described.record
    return schemas.AddressDetailResponse(
        address=address(record),
        feed=schemas.FeedCountsOut(
            events=described.counts.retained,
            unacknowledged=described.counts.unacknowledged,
            last_sequence=described.counts.last_sequence,
            max_events=settings.max_events,
        ),
        state=state_usage(described.state, settings),
        endpoints=schemas.AddressEndpointsOut(**urls.endpoints(base, record.id)),
    )


def deleted_address(address_id: str) -> schemas.DeleteResponse:
    return schemas.DeleteResponse(address=schemas.DeletedAddressOut(id=address_id), deleted=True)


def delivery(result: AppendResult) -> schemas.DeliveryResponse:
    """An inbox post or an email replay: the (first) event it made or found."""
    first = result.events[0]
    return schemas.DeliveryResponse(
        duplicate=result.duplicate, event=schemas.EventRefOut(id=first.id, sequence=first.sequence)
    )


def event(item: Event) -> schemas.EventOut:
    data, as_text = jsontext.stored(item.data_json)
    return schemas.EventOut(
        id=item.id,
        sequence=item.sequence,
        type=item.type,
        source=item.source,
        ingress_surface=item.ingress_surface,
        data=data,
        data_encoding=schemas.JSON_TEXT if as_text else None,
        created_at=iso(item.created_at),
        acknowledged_at=None if item.acknowledged_at is None else iso(item.acknowledged_at),
        content_type=item.content_type,
        headers=None if item.headers is None else dict(item.headers),
        verified_by=item.verified_by,
    )


def feed(page: FeedPage, after: int) -> schemas.FeedResponse:
    """A page of the feed; an empty page leaves the cursor where the caller had it, or past a trim."""
    next_cursor = page.events[-1].sequence if page.events else max(after, page.trimmed_through)
    return schemas.FeedResponse(
        events=[event(item) for item in page.events],
        next_cursor=next_cursor,
        has_more=page.has_more,
        trimmed_through=page.trimmed_through,
    )


def trimmed(result: TrimResult) -> schemas.TrimResponse:
    return schemas.TrimResponse(trimmed=result.trimmed, trimmed_through=result.trimmed_through)


def acknowledged(item: Acknowledged) -> schemas.AckResponse:
    return schemas.AckResponse(
        event=schemas.AckedEventOut(id=item.id, sequence=item.sequence, acknowledged_at=iso(item.acknowledged_at))
    )


def state_value(entry: StateEntry | StateWrite) -> schemas.StateValueOut:
    """A key as read, or as a write left it (a value the caller gave, so never too deep)."""
    if isinstance(entry, StateWrite):
        value, as_text = entry.value, False
    else:
        value, as_text = jsontext.stored(entry.value_json or "null")
    return schemas.StateValueOut(
        key=entry.key,
        value=value,
        value_encoding=schemas.JSON_TEXT if as_text else None,
        revision=entry.revision,
        updated_at=iso(entry.updated_at),
    )


def state_deletion(write: StateWrite) -> schemas.DeletedStateOut:
    return schemas.DeletedStateOut(key=write.key, deleted=True, revision=write.revision)


def state_listing(entries: list[StateEntry], usage: StateUsage, settings: Settings) -> schemas.StateListResponse:
    keys = [
        schemas.StateKeyOut(key=entry.key, revision=entry.revision, size=entry.size, updated_at=iso(entry.updated_at))
        for entry in entries
    ]
    return schemas.StateListResponse(keys=keys, usage=state_usage(usage, settings))


def state_batch(writes: list[StateWrite], usage: StateUsage, settings: Settings) -> schemas.StateBatchResponse:
    results: list[schemas.StateSetResult | schemas.StateDeleteResult] = [
        schemas.StateSetResult(key=write.key, op="set", revision=write.revision, value=write.value)
        if write.op == "set"
        else schemas.StateDeleteResult(key=write.key, op="delete", revision=write.revision)
        for write in writes
    ]
    return schemas.StateBatchResponse(results=results, usage=state_usage(usage, settings))


def state_usage(usage: StateUsage, settings: Settings) -> schemas.StateUsageOut:
    return schemas.StateUsageOut(
        keys=usage.keys, bytes=usage.bytes, max_keys=settings.state_max_keys, max_bytes=settings.state_max_bytes
    )


def contact(found: Contact) -> schemas.ContactOut:
    return schemas.ContactOut(
        email=found.email,
        status=found.status,
        created_at=iso(found.created_at),
        verified_at=None if found.verified_at is None else iso(found.verified_at),
    )


def contacts(found: list[Contact], *, configured: bool) -> schemas.ContactsResponse:
    return schemas.ContactsResponse(contacts=[contact(each) for each in found], outbound_configured=configured)


def contact_change(change: ContactChange) -> schemas.ContactResponse:
    shown = contact(change.contact)
    return schemas.ContactResponse(contact=shown, code_sent=change.code_sent, email=shown.email, status=shown.status)


def sent(result: SendResult) -> schemas.SendResponse:
    return schemas.SendResponse(
        status="accepted" if result.status == "accepted" else "failed",
        message_id=result.message_id,
        event=schemas.EventRefOut(id=result.event.id, sequence=result.event.sequence),
        duplicate=result.duplicate,
    )


def inbox_settings(settings: InboxSettings) -> schemas.InboxSettingsResponse:
    """An inbox's settings as the owner may see them: every verifier, none of their secrets."""
    return schemas.InboxSettingsResponse(
        inbox=schemas.InboxSettingsOut(
            keep_headers=list(settings.keep_headers),
            verifiers=[
                schemas.VerifierOut(kind=item.kind, tolerance_s=item.tolerance_s, created_at=iso(item.created_at))
                for item in settings.verifiers
            ],
        )
    )
