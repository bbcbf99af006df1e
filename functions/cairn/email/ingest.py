"""Turn a received message into `email.received` events, one per address.

The receiver (SES in AWS, the SMTP listener of `cairn serve`) stores the raw
message first, then hands over its id and envelope recipients. Receivers
redeliver, a lost delivery can be replayed, senders' servers retry after
timeouts and mailing lists deliver one message twice, so each event is
claimed under the message's `Message-ID` header (under the receiver's id
when it has none): one message never makes two events in one feed while
its first event is retained.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from email.message import EmailMessage

import msgspec
from aws_lambda_powertools import Logger

from cairn import credentials, jsontext
from cairn.addresses import rate_windows
from cairn.addresses.access import authenticate, is_live
from cairn.addresses.models import AppendResult, IdempotencyClaim, NewEvent
from cairn.addresses.ports import AddressStore, AppendRequest, RateLimiter, Waiter
from cairn.clock import Clock
from cairn.email import mime
from cairn.email.ports import RawMessageStore
from cairn.errors import NotFound, QuotaExceeded, RateLimited, Unauthorized
from cairn.settings import Settings

EVENT_TYPE = "email.received"
# The local part of an address's email is its id (see credentials.new_address_id).
_ADDRESS_ID = re.compile(r"addr_[a-z2-7]{26}")

logger = Logger(service="cairn")


class Verdicts(msgspec.Struct, frozen=True):
    """The receiving server's checks, lower-cased; None where nothing was checked."""

    spf: str | None = None
    dkim: str | None = None
    dmarc: str | None = None
    spam: str | None = None
    virus: str | None = None


class Delivery(msgspec.Struct, frozen=True):
    """A stored message and the envelope recipients it was delivered to."""

    message_id: str
    recipients: Sequence[str]
    verdicts: Verdicts = msgspec.field(default_factory=Verdicts)
    # None: ingest counts each address against its mail rate. Else the receiver counted them
    # before it took the message (`cairn serve`'s SMTP listener), and these were over the rate.
    over_rate: frozenset[str] | None = None


def email_claims(message_id: str, internet_message_id: str | None) -> list[IdempotencyClaim]:
    """The claims a message's event may hold in a feed, the one ingest takes first.

    Ingest claims the `Message-ID` header when the message has one, so a
    resend stored under another receiver id finds the first event; without
    one, the receiver's id. The receiver-id claim follows as the one events
    ingested before header claims hold. The NUL separator keeps every claim
    out of reach of inbox clients, whose keys are printable: no
    `Idempotency-Key` can take or forge a message's claim.
    """
    receiver = _claim("email\x00" + message_id, message_id)
    header = (internet_message_id or "").strip()
    if not header:
        return [receiver]
    return [_claim("email-header\x00" + header, header), receiver]


def _claim(key: str, request: str) -> IdempotencyClaim:
    return IdempotencyClaim(key_digest=credentials.digest(key), request_digest=credentials.digest(request))


def address_id_of(recipient: str, email_domain: str) -> str | None:
    """The address id a recipient names at the email domain, or None for anyone else."""
    local, _, domain = recipient.strip().strip("<>").lower().rpartition("@")
    if domain != email_domain.lower() or not _ADDRESS_ID.fullmatch(local):
        return None
    return local


class StoredMessageMissing(Exception):
    """The receiver announced a message that is not in storage.

    SES stores a message before it invokes ingest, so this is a wrong
    bucket or prefix, or a message removed by hand. Raised, not dropped:
    Lambda retries, then leaves the SES event in the failed-ingest queue,
    whose alarm tells an operator, and the event can be replayed once the
    message is back.
    """

    def __init__(self, message_id: str) -> None:
        super().__init__(f"stored message missing: {message_id}")
        self.message_id = message_id


class EmailIngest:
    def __init__(
        self,
        table: AddressStore,
        raw_messages: RawMessageStore,
        limiter: RateLimiter,
        waiter: Waiter,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._table = table
        self._raw_messages = raw_messages
        self._limiter = limiter
        self._waiter = waiter
        self._settings = settings
        self._clock = clock

    def ingest(self, delivery: Delivery) -> dict[str, AppendResult]:
        """Append the message to every live address among its recipients.

        Returns the event each address got. Strangers, unknown, expired or
        deleted addresses, addresses past their mail rate and full feeds are
        logged with the reason and skipped, never raised: the receiver would
        only redeliver into the same refusal. Storage trouble and a message
        missing from storage are raised, so the receiver retries and,
        failing that, keeps the delivery.
        """
        address_ids = self._address_ids(delivery.recipients)
        if not address_ids:
            self._discard(delivery.message_id)
            return {}
        raw = self._raw_messages.load(delivery.message_id)
        if raw is None:
            if not any(is_live(self._table, address_id, now=self._clock()) for address_id in address_ids):
                # Discarded by an earlier delivery of the same message: nobody here to keep it for.
                return {}
            raise StoredMessageMissing(delivery.message_id)
        message = mime.parse(raw)
        event = self._event(delivery.message_id, message, delivery.verdicts)
        claims = email_claims(delivery.message_id, mime.message_id(message))
        results: dict[str, AppendResult] = {}
        refusals: set[str] = set()
        for address_id in address_ids:
            try:
                if delivery.over_rate is None:
                    self.count_message(address_id)
                elif address_id in delivery.over_rate:
                    raise self._rate_spent(rate_windows.retry_after(self._clock()))
                results[address_id] = self._append(address_id, claims, event)
            except (Unauthorized, QuotaExceeded, RateLimited) as refusal:
                refusals.add(refusal.code)
                logger.info(
                    "email not delivered",
                    extra={"message_id": delivery.message_id, "address_id": address_id, "reason": refusal.code},
                )
        # Kept while an owner may replay it (a full feed, a spent rate); mail for no address is not kept.
        if not results and refusals <= {Unauthorized.code}:
            self._discard(delivery.message_id)
        return results

    def _discard(self, message_id: str) -> None:
        self._raw_messages.delete(message_id)
        logger.info("stored email deleted", extra={"message_id": message_id, "reason": "no_address"})

    def count_message(self, address_id: str) -> None:
        """One message against the address's mail rate; `RateLimited` when it is spent for this minute."""
        retry_after = self._limiter.hit(
            "email", address_id, limit=self._settings.email_rate_per_minute, now=self._clock()
        )
        if retry_after is not None:
            raise self._rate_spent(retry_after)

    def count_recipients(self, recipients: Sequence[str]) -> tuple[list[str], frozenset[str]]:
        """One message against the rate of each address `recipients` name (once each); the addresses, and those over.

        For a receiver that counts before it takes the message, so that it can
        refuse it (and the sender keep it) when it would reach no address.
        """
        address_ids = self._address_ids(recipients)
        over = set()
        for address_id in address_ids:
            try:
                self.count_message(address_id)
            except RateLimited:
                over.add(address_id)
        return address_ids, frozenset(over)

    def _rate_spent(self, retry_after: int) -> RateLimited:
        limit = self._settings.email_rate_per_minute
        return RateLimited(f"At most {limit} messages per address per minute.", retry_after=retry_after)

    def message_rate_spent(self, address_id: str) -> bool:
        """Whether the address's mail rate is spent for this minute; counts nothing.

        A receiver that can refuse a recipient asks before taking a message:
        the message itself is counted when it is taken (`count_recipients`),
        so naming an address and then dropping the message costs it nothing.
        """
        limit = self._settings.email_rate_per_minute
        return self._limiter.spent("email", address_id, limit=limit, now=self._clock()) is not None

    def recipient_address(self, recipient: str) -> str | None:
        """The address id a recipient names at the email domain, or None for anyone else."""
        return address_id_of(recipient, self._settings.email_domain)

    def replay(self, address_id: str, read_token: str | None, message_id: str) -> AppendResult:
        """Ingest a stored message for one address again (recovery).

        Only a message that names this address as a recipient can be
        replayed into its feed; any other id gets the same 404 as a missing
        one. The event already exists when the first delivery succeeded: then
        it is returned with `duplicate`.
        """
        record = authenticate(self._table, address_id, read_token, now=self._clock())
        raw = self._raw_messages.load(message_id)
        message = None if raw is None else mime.parse(raw)
        if message is None or record.email.lower() not in mime.recipients_named(message):
            raise NotFound("No stored message with this id was delivered to this address.", message_id=message_id)
        # The receiver's verdicts came with the lost delivery, not the message.
        event = self._event(message_id, message, Verdicts())
        return self._append(address_id, email_claims(message_id, mime.message_id(message)), event)

    def _address_ids(self, recipients: Sequence[str]) -> list[str]:
        """Recipients that are Cairn addresses, each once, in envelope order."""
        found: dict[str, None] = {}  # ordered, and each looked up at once: an envelope may list thousands
        for recipient in recipients:
            local = self.recipient_address(recipient)
            if local is None:
                logger.info("email for a stranger", extra={"recipient": recipient})
            else:
                found[local] = None
        return list(found)

    def _event(self, message_id: str, message: EmailMessage, verdicts: Verdicts) -> NewEvent:
        data = {
            "message_id": message_id,
            **mime.content(message, text_max_bytes=self._settings.email_text_max_bytes),
            "verdicts": msgspec.structs.asdict(verdicts),
        }
        return NewEvent(
            type=EVENT_TYPE,
            # The mail surface's name is its source too: `email`, or AgentAddress's `resend` on both fields.
            source=self._settings.email_ingress_surface,
            data_json=jsontext.canonical(data),
            ingress_surface=self._settings.email_ingress_surface,
        )

    def _append(self, address_id: str, claims: list[IdempotencyClaim], event: NewEvent) -> AppendResult:
        first, *earlier = claims
        # An event ingested before header claims holds only its receiver-id claim: checked in the same
        # commit, so the header costs no read.
        result = self._table.append(
            AppendRequest(
                address_id=address_id,
                events=[event],
                credential=None,
                now=self._clock(),
                idempotency=first,
                earlier_claims=earlier,
            )
        )
        if not result.duplicate:
            self._waiter.notify(address_id)
        return result
