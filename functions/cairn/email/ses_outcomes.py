"""SES's event-publishing records, read as the outcome of one of Cairn's sends.

SES publishes one JSON record per event of a message sent through the
configuration set (delivered to the outcome function through SNS). The
message tags Cairn set when sending (`cairn_address`, `cairn_send`, and
`cairn_attempt` on a hand-off tried again after a refusal) lead back to the
address, its `email.sent` event and the attempt, so no lookup is needed.
Events that do not end a send (Send, Open, Click, DeliveryDelay,
Subscription) and records without Cairn's tags are not outcomes.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from cairn import credentials
from cairn.addresses.models import sequence_of
from cairn.email.outbound_ports import CarrierOutcome
from cairn.email.sending import ADDRESS_TAG, ATTEMPT_TAG, SEND_TAG

# SES event type → the outcome event Cairn appends.
_OUTCOMES: dict[str, CarrierOutcome] = {
    "Delivery": "delivered",
    "Bounce": "bounced",
    "Complaint": "complained",
    "Reject": "failed",
    "Rendering Failure": "failed",
}
_DETAIL_CHARS = 500
# More than any retry could open: one attempt per refusal, and retries end a day after the send.
_MAX_ATTEMPT = 1_000_000


class OutcomeReport(msgspec.Struct, frozen=True):
    address_id: str
    send_event_id: str
    outcome: CarrierOutcome
    message_id: str | None
    provider_message_id: str | None
    detail: str | None
    attempt: int = 1


def outcome_report(record_text: str) -> OutcomeReport | None:
    """The outcome a published SES record reports, or None when it reports none of Cairn's."""
    try:
        record = json.loads(record_text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    outcome = _OUTCOMES.get(str(record.get("eventType") or record.get("notificationType")))
    mail = _object(record.get("mail"))
    tags = _object(mail.get("tags"))
    address_id, send_event_id = _tag(tags, ADDRESS_TAG), _tag(tags, SEND_TAG)
    if outcome is None or address_id is None or send_event_id is None:
        return None
    if not credentials.is_address_id(address_id) or sequence_of(send_event_id) is None:
        return None
    headers = _object(mail.get("commonHeaders"))
    attempt = _tag(tags, ATTEMPT_TAG) or "1"
    if not attempt.isdigit() or not 0 < int(attempt) <= _MAX_ATTEMPT:
        return None
    return OutcomeReport(
        address_id=address_id,
        send_event_id=send_event_id,
        outcome=outcome,
        message_id=_text(headers.get("messageId")),
        provider_message_id=_text(mail.get("messageId")),
        detail=_detail(record),
        attempt=int(attempt),
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tag(tags: dict[str, Any], name: str) -> str | None:
    values = tags.get(name)
    return values[0] if isinstance(values, list) and values and isinstance(values[0], str) else None


def _text(value: Any) -> str | None:
    return value[:_DETAIL_CHARS] if isinstance(value, str) else None


def _detail(record: dict[str, Any]) -> str | None:
    """What the receiving side said, briefly: a bounce's type and diagnostic, a rejection's reason."""
    bounce = record.get("bounce")
    if isinstance(bounce, dict):
        recipients = bounce.get("bouncedRecipients") or [{}]
        diagnostic = recipients[0].get("diagnosticCode") if isinstance(recipients[0], dict) else None
        parts = [bounce.get("bounceType"), bounce.get("bounceSubType"), diagnostic]
        return _text(" / ".join(str(part) for part in parts if part))
    complaint = record.get("complaint")
    if isinstance(complaint, dict):
        return _text(complaint.get("complaintFeedbackType"))
    for name, field in (("reject", "reason"), ("failure", "errorMessage"), ("delivery", "smtpResponse")):
        part = record.get(name)
        if isinstance(part, dict):
            return _text(part.get(field))
    return None
