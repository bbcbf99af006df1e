"""Send plain-text mail from an address to one verified contact, and record how it ended.

A send is one append: the `email.sent` event, the idempotency claim of its
key, one more feed slot reserved for the outcome and one count against the
day's allowance commit together or not at all, and only then is the
message handed to the carrier, under a lease in the `HandoffLedger`. A
retry with the same key and body finds the claim and answers with the
original: if that send never reached the carrier (its answer or its process
was lost after the commit) and is less than a day old, the retry takes the
lease and hands the same message (same `Message-ID`) over itself; if the
carrier refused it, the retry opens the next hand-off attempt (one commit:
the attempt leased to it, one more outcome slot and its deadline, so of two
racing retries one opens it) and hands the message over again; otherwise
nothing is sent again, for as long as the `email.sent` event is retained.
The outcome (`email.delivered`, `email.bounced`,
`email.complained` or `email.failed`) spends the reserved slot, once per
hand-off attempt: it is claimed under the send's event id and the attempt.
The same append stores the slot's deadline; if no outcome has come by then,
the outcome sweep (`outcome_sweep.py`) records `email.outcome_unknown` in
the slot instead, and a report arriving after that is a duplicate.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aws_lambda_powertools import Logger

from cairn import credentials, jsontext
from cairn.addresses.access import authenticate
from cairn.addresses.models import (
    OUTBOUND_SURFACE,
    AddressRecord,
    AppendResult,
    EventRef,
    IdempotencyClaim,
    NewEvent,
    sequence_of,
)
from cairn.addresses.ports import (
    AddressStore,
    AppendRequest,
    Credential,
    CredentialKind,
    HandoffMoved,
    OutcomeDeadline,
    RetriedHandoff,
    SendAllowance,
    Waiter,
)
from cairn.addresses.quota import Writer
from cairn.clock import Clock
from cairn.email import composing
from cairn.email.ingest import EVENT_TYPE as RECEIVED_TYPE
from cairn.email.outbound_ports import (
    ComposedMessage,
    ContactStore,
    HandoffLedger,
    MailerError,
    OutboundMailer,
    Outcome,
)
from cairn.errors import (
    InvalidReplyTo,
    InvalidRequest,
    OutboundNotConfigured,
    PayloadTooLarge,
    PlainTextOnly,
    QuotaExceeded,
    RecipientNotVerified,
    TooManyRecipients,
    Unauthorized,
    UnknownRecipient,
)
from cairn.settings import Settings

SENT_TYPE = "email.sent"
EVENT_SOURCE = "email"
# Carrier tags (SES message tags) that lead an outcome back to its send.
ADDRESS_TAG = "cairn_address"
SEND_TAG = "cairn_send"
# The hand-off attempt, on attempts after a refused first one (absent: the first).
ATTEMPT_TAG = "cairn_attempt"
_RECIPIENT_FIELDS = ("cc", "bcc")
_NON_TEXT_FIELDS = ("html", "attachments", "headers", "content_type")
_FIELDS = ("to", "subject", "text", "reply_to_event_id")
# A retry finishes a lost hand-off within this long of the send; later, the send stays as recorded.
RECOVERY_SECONDS = 86_400
# How long one caller holds a hand-off: past the carrier's longest answer (an SMTP relay's 30 s).
# A retry within it answers with the original; a retry after it finishes a hand-off that died.
HANDOFF_LEASE_SECONDS = 60

logger = Logger(service="cairn")


class SendResult(msgspec.Struct, frozen=True):
    """`status` is `accepted` once the carrier took it, `failed` when it refused at once."""

    status: str
    message_id: str
    event: EventRef
    duplicate: bool


class Sending:
    def __init__(
        self,
        table: AddressStore,
        contacts: ContactStore,
        ledger: HandoffLedger,
        mailer: OutboundMailer | None,
        waiter: Waiter,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._table = table
        self._contacts = contacts
        self._ledger = ledger
        self._mailer = mailer
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def send(self, address_id: str, read_token: str | None, idempotency_key: str | None, body: Any) -> SendResult:
        fields = self._fields(body)
        key = self._key(idempotency_key)
        now = self._clock()
        record = authenticate(self._table, address_id, read_token, now=now)
        if self._mailer is None:
            raise OutboundNotConfigured()
        recipient = fields["to"]
        found = self._contacts.get(address_id, recipient)
        if found is None or found[0].status != "verified":
            # A retry of a send that went before its recipient was removed is answered as that send.
            sent = self._claimed_send(address_id, _send_claim(key, fields), now=now)
            if sent is not None:
                return self._original(record, sent, now=now)
            if found is None:
                raise UnknownRecipient("The recipient is not a contact of this address; add and verify it first.")
            raise RecipientNotVerified("The recipient has not confirmed its code yet.")
        thread = self._thread(address_id, fields["reply_to_event_id"], now=now)
        subject = fields["subject"]
        if subject is None:
            if thread is None:
                raise InvalidRequest("subject is required unless reply_to_event_id is given.", field="subject")
            subject = composing.reply_subject(thread)
        sender, reply_to = composing.senders(record.email, self._settings.outbound_from)
        message = composing.compose(
            sender=sender,
            reply_to=reply_to,
            recipient=recipient,
            subject=subject,
            text=fields["text"],
            message_id=composing.new_message_id(self._settings.email_domain),
            now=now,
            thread=thread,
        )
        in_reply_to, references = composing.thread_headers(thread)
        # The message's own headers: what a reader sees, and what a retry composes the same message from.
        data = {
            "message_id": message.message_id,
            "from": sender,
            "reply_to": reply_to,
            "to": recipient,
            "subject": subject,
            "text": fields["text"],
            "reply_to_event_id": fields["reply_to_event_id"],
            "in_reply_to": in_reply_to,
            "references": list(references),
        }
        event = NewEvent(
            type=SENT_TYPE, source=EVENT_SOURCE, data_json=jsontext.canonical(data), ingress_surface=OUTBOUND_SURFACE
        )
        result = self._table.append(
            AppendRequest(
                address_id=address_id,
                events=[event],
                credential=Credential(CredentialKind.READ_TOKEN, record.read_token_digest),
                now=now,
                idempotency=_send_claim(key, fields),
                outcome_slots=1,
                outcome_deadline=OutcomeDeadline(at=now + self._outcome_wait(), message_id=message.message_id),
                send_allowance=SendAllowance(limit=self._settings.outbound_max_sends_per_day),
                writer=Writer.OWNER,
            )
        )
        (ref,) = result.events
        if result.duplicate:
            return self._original(record, ref, now=now)
        self._waiter.notify(address_id)
        turn = self._ledger.take_turn(address_id, ref.sequence, now=now, lease_seconds=HANDOFF_LEASE_SECONDS)
        if turn.kind != "yours":
            # A retry racing this very request took the hand-off: the message goes once, from there.
            return SendResult(status="accepted", message_id=message.message_id, event=ref, duplicate=False)
        status = self._hand_off(address_id, ref, message, attempt=turn.attempt)
        return SendResult(status=status, message_id=message.message_id, event=ref, duplicate=False)

    def _claimed_send(self, address_id: str, claim: IdempotencyClaim, *, now: float) -> EventRef | None:
        """The send this key made before, if any; `IdempotencyKeyReused` when it came with another message."""
        claimed = self._table.claimed_event(address_id, claim.key_digest, now=now)
        if claimed is None:
            return None
        claim.check_same_request(claimed.request_digest)
        return claimed.ref

    def _outcome_wait(self) -> int:
        """How long a send's outcome slot waits for the carrier's report.

        Never past the event retention: the claim a real outcome left is
        kept a retention from when it came, so it is surely there until the
        send's own retention ends; a sweep after that could miss it and
        spend the slot twice.
        """
        return min(self._settings.outbound_outcome_deadline_seconds, self._settings.event_retention_seconds)

    def _hand_off(self, address_id: str, ref: EventRef, message: ComposedMessage, *, attempt: int) -> str:
        """Give the message to the carrier as hand-off `attempt` and record what it said; `accepted` or `failed`."""
        mailer = self._mailer
        assert mailer is not None  # checked before anything was recorded
        tags: tuple[tuple[str, str], ...] = ((ADDRESS_TAG, address_id), (SEND_TAG, ref.id))
        if attempt > 1:
            tags += ((ATTEMPT_TAG, str(attempt)),)
        try:
            handoff = mailer.send(msgspec.structs.replace(message, tags=tags))
        except MailerError as error:
            logger.warning("outbound mail refused", extra={"address_id": address_id, "reason": error.reason})
            self._ledger.refused(address_id, ref.sequence, now=self._clock(), attempt=attempt)
            self.record_outcome(
                address_id, ref.id, "failed", message_id=message.message_id, detail=error.reason, attempt=attempt
            )
            return "failed"
        # Recorded before the outcome: a retry that finds it done records a lost outcome, never mails again.
        self._ledger.done(address_id, ref.sequence, handoff, now=self._clock(), attempt=attempt)
        if handoff.outcome is not None:
            self.record_outcome(
                address_id,
                ref.id,
                handoff.outcome,
                message_id=message.message_id,
                provider_message_id=handoff.provider_message_id,
                attempt=attempt,
            )
        return "accepted"

    def record_outcome(
        self,
        address_id: str,
        send_event_id: str,
        outcome: Outcome,
        *,
        message_id: str | None,
        provider_message_id: str | None = None,
        detail: str | None = None,
        attempt: int = 1,
    ) -> AppendResult | None:
        """Append the outcome event of hand-off `attempt` in the slot it reserved; later reports are duplicates.

        An address deleted or expired since the send is logged and skipped:
        the carrier would only report again into the same refusal.
        """
        data = {
            "send_event_id": send_event_id,
            "message_id": message_id,
            "provider_message_id": provider_message_id,
            "detail": detail,
            "attempt": attempt,
        }
        # The first attempt's claim is the one every send had before retries of refused hand-offs.
        claim_key = "email-outcome\x00" + send_event_id + ("" if attempt == 1 else f"\x00{attempt}")
        try:
            result = self._table.append(
                AppendRequest(
                    address_id=address_id,
                    events=[
                        NewEvent(
                            type=f"email.{outcome}",
                            source=EVENT_SOURCE,
                            data_json=jsontext.canonical(data),
                            ingress_surface=OUTBOUND_SURFACE,
                        )
                    ],
                    credential=None,
                    now=self._clock(),
                    idempotency=IdempotencyClaim(
                        key_digest=credentials.digest(claim_key), request_digest=credentials.digest(claim_key)
                    ),
                    outcome_slots=-1,
                    writer=Writer.OWNER,
                )
            )
        except (Unauthorized, QuotaExceeded) as refusal:
            logger.info("outcome not recorded", extra={"address_id": address_id, "reason": refusal.code})
            return None
        if not result.duplicate:
            self._waiter.notify(address_id)
        return result

    def _original(self, record: AddressRecord, ref: EventRef, *, now: float) -> SendResult:
        """The first send's answer; within a day of it, a lost hand-off is finished and a refused one tried again."""
        address_id = record.id
        event = self._table.load_event(address_id, ref.sequence, now=now)
        data = event.data if event is not None and isinstance(event.data, dict) else {}
        message_id = str(data.get("message_id", ""))
        if event is None or now - event.created_at >= RECOVERY_SECONDS:
            return SendResult(status="accepted", message_id=message_id, event=ref, duplicate=True)
        status = "accepted"
        turn = self._ledger.take_turn(address_id, ref.sequence, now=now, lease_seconds=HANDOFF_LEASE_SECONDS)
        if turn.kind == "yours":
            logger.info("finishing a lost hand-off", extra={"address_id": address_id, "event_id": ref.id})
            status = self._hand_off(address_id, ref, _recomposed(data, now=now), attempt=turn.attempt)
        elif turn.outcome is not None:
            # The carrier's answer came, but its outcome event may not have: it is claimed once.
            self.record_outcome(
                address_id,
                ref.id,
                turn.outcome,
                message_id=message_id,
                provider_message_id=turn.provider_message_id,
                attempt=turn.attempt,
            )
            status = "accepted"
            if turn.outcome == "failed":
                status = self._retry_refused(record, ref, data, attempt=turn.attempt, now=now)
        return SendResult(status=status, message_id=message_id, event=ref, duplicate=True)

    def _retry_refused(
        self, record: AddressRecord, ref: EventRef, data: dict[str, Any], *, attempt: int, now: float
    ) -> str:
        """Open the hand-off attempt after the refused `attempt` and hand the same message over again.

        One commit leases the new attempt to this caller, reserves its outcome
        slot and stores the slot's deadline; it passes only while `attempt` is
        the last and refused, so of racing retries exactly one mails. The
        others answer `accepted`, as for a hand-off in progress. A feed with no
        free slot refuses (`quota_exceeded`), as a new send would.
        """
        message = _recomposed(data, now=now)
        try:
            self._table.append(
                AppendRequest(
                    address_id=record.id,
                    events=[],
                    credential=Credential(CredentialKind.READ_TOKEN, record.read_token_digest),
                    now=now,
                    outcome_slots=1,
                    outcome_deadline=OutcomeDeadline(
                        at=now + self._outcome_wait(), message_id=message.message_id, send=ref, attempt=attempt + 1
                    ),
                    retried_handoff=RetriedHandoff(
                        sequence=ref.sequence, attempt=attempt, lease_until=now + HANDOFF_LEASE_SECONDS
                    ),
                    writer=Writer.OWNER,
                )
            )
        except HandoffMoved:
            return "accepted"
        logger.info("retrying a refused hand-off", extra={"address_id": record.id, "event_id": ref.id})
        return self._hand_off(record.id, ref, message, attempt=attempt + 1)

    def _fields(self, body: Any) -> dict[str, Any]:
        """The message a body asks for, or the refusal that says what is wrong with it."""
        if not isinstance(body, dict):
            raise InvalidRequest("The body must be a JSON object with to, subject and text.")
        several = isinstance(body.get("to"), list) and len(body["to"]) > 1
        if several or any(name in body for name in _RECIPIENT_FIELDS):
            raise TooManyRecipients("A message goes to exactly one verified contact.")
        if any(name in body for name in _NON_TEXT_FIELDS):
            raise PlainTextOnly("Only plain text can be sent: no html, attachments or headers.")
        unknown = sorted(set(body) - set(_FIELDS))
        if unknown:
            raise InvalidRequest(f"Unknown field: {unknown[0]}.", field=unknown[0])
        to = body.get("to")
        if isinstance(to, list):
            to = to[0] if to else None
        if isinstance(to, str) and ("," in to or ";" in to):
            raise TooManyRecipients("A message goes to exactly one verified contact.")
        recipient = composing.contact_email(to, field="to")
        text = body.get("text")
        if not isinstance(text, str) or not text:
            raise PlainTextOnly("text must be a non-empty string of plain text.", field="text")
        limit = self._settings.outbound_max_text_bytes
        if len(text.encode("utf-8", "surrogatepass")) > limit:
            raise PayloadTooLarge(f"text exceeds {limit} bytes.", max_bytes=limit)
        subject = body.get("subject")
        reply_to = body.get("reply_to_event_id")
        if reply_to is not None and not isinstance(reply_to, str):
            raise InvalidReplyTo("reply_to_event_id must be the id of an email.received event.")
        return {
            "to": recipient,
            "subject": None if subject is None else composing.subject_line(subject),
            "text": text,
            "reply_to_event_id": reply_to,
        }

    def _key(self, idempotency_key: str | None) -> str:
        limit = self._settings.max_idempotency_key_length
        if not idempotency_key or len(idempotency_key) > limit or not idempotency_key.isprintable():
            raise InvalidRequest(
                f"An Idempotency-Key header of 1 to {limit} printable characters is required.",
                field="Idempotency-Key",
            )
        return idempotency_key

    def _thread(self, address_id: str, reply_to: str | None, *, now: float) -> composing.Thread | None:
        """The received mail `reply_to` names: retained, of this address, and really delivered by mail."""
        if reply_to is None:
            return None
        sequence = sequence_of(reply_to)
        event = None if sequence is None else self._table.load_event(address_id, sequence, now=now)
        if (
            event is None
            or event.id != reply_to
            or event.type != RECEIVED_TYPE
            or event.ingress_surface != self._settings.email_ingress_surface
            or not isinstance(event.data, dict)
        ):
            raise InvalidReplyTo(
                "reply_to_event_id must name a retained email.received event that came to this address by mail.",
                reply_to_event_id=reply_to,
            )
        data = event.data
        message_id = data.get("internet_message_id")
        references = data.get("references")
        subject = data.get("subject")
        return composing.Thread(
            message_id=message_id if isinstance(message_id, str) else None,
            references=tuple(ref for ref in references if isinstance(ref, str)) if isinstance(references, list) else (),
            subject=subject if isinstance(subject, str) else "",
        )


def _recomposed(data: dict[str, Any], *, now: float) -> ComposedMessage:
    """The message a recorded `email.sent` event describes, with its original `Message-ID` and headers."""
    in_reply_to = data.get("in_reply_to")
    references = data.get("references")
    earlier = tuple(str(ref) for ref in references) if isinstance(references, list) else ()
    # `references` ends with the mail answered (events recorded before it did hold only the earlier ones).
    if earlier and earlier[-1] == in_reply_to:
        earlier = earlier[:-1]
    thread = composing.Thread(message_id=in_reply_to, references=earlier, subject="")
    reply_to = data.get("reply_to")
    return composing.compose(
        sender=str(data["from"]),
        reply_to=reply_to if isinstance(reply_to, str) else None,
        recipient=str(data["to"]),
        subject=str(data["subject"]),
        text=str(data["text"]),
        message_id=str(data["message_id"]),
        now=now,
        thread=thread if thread.message_id else None,
    )


def _send_claim(key: str, fields: dict[str, Any]) -> IdempotencyClaim:
    """The key's claim, apart from inbox keys (the NUL no header carries), and the message it came with."""
    return IdempotencyClaim(
        key_digest=credentials.digest("email-send\x00" + key),
        request_digest=credentials.digest(jsontext.canonical(fields)),
    )
