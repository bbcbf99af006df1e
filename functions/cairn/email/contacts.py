"""Contacts an address may mail: a six-digit code proves the person reads that mailbox.

The code is mailed from the address's own email, saying which task asks
and that ignoring it is safe. It is never returned and stored only as a
salted digest; it expires after 15 minutes, allows 5 tries, and asking
again replaces it (not sooner than a minute after the last). Codes mailed
per address and UTC day are limited apart from sends
(`outbound_verifications_per_day`).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from cairn import credentials
from cairn.addresses.access import authenticate
from cairn.addresses.models import AddressRecord
from cairn.addresses.ports import AddressStore, RateLimiter
from cairn.clock import Clock
from cairn.email import composing
from cairn.email.outbound_ports import Contact, ContactStore, ContactVerified, MailerError, OutboundMailer, PendingCode
from cairn.errors import NotFound, OutboundNotConfigured, RateLimited, Unavailable, WrongCode
from cairn.settings import DAY_SECONDS, Settings

VERIFY_SCOPE = "verify"
CODE_DIGITS = 6
CODE_TTL_SECONDS = 15 * 60
CODE_ATTEMPTS = 5
RESEND_SECONDS = 60


@dataclass(frozen=True)
class ContactChange:
    """A contact after a request, and whether a code went out for it."""

    contact: Contact
    code_sent: bool


class Contacts:
    def __init__(
        self,
        table: AddressStore,
        contacts: ContactStore,
        limiter: RateLimiter,
        mailer: OutboundMailer | None,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._table = table
        self._contacts = contacts
        self._limiter = limiter
        self._mailer = mailer
        self._settings = settings
        self._clock = clock

    @property
    def configured(self) -> bool:
        return self._mailer is not None

    def list(self, address_id: str, read_token: str | None) -> list[Contact]:
        authenticate(self._table, address_id, read_token, now=self._clock())
        return self._contacts.list(address_id)

    def request_code(self, address_id: str, read_token: str | None, email_value: object) -> ContactChange:
        """Mail a new code to `email` (a new contact, or a pending one); a verified contact is left as is."""
        email = composing.contact_email(email_value, field="email")
        now = self._clock()
        record = authenticate(self._table, address_id, read_token, now=now)
        mailer = self._require_mailer()
        code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
        salt = secrets.token_hex(16)
        pending = PendingCode(
            salt=salt,
            digest=code_digest(salt, code),
            expires_at=now + CODE_TTL_SECONDS,
            sent_at=now,
            attempts=0,
        )
        try:
            self._contacts.put_code(
                address_id,
                email,
                pending,
                now=now,
                address_expires_at=record.expires_at,
                max_contacts=self._settings.outbound_max_contacts,
                resend_after=now - RESEND_SECONDS,
            )
        except ContactVerified:
            return ContactChange(self._existing(address_id, email), code_sent=False)
        wait = self._limiter.hit(
            VERIFY_SCOPE,
            address_id,
            limit=self._settings.outbound_verifications_per_day,
            now=now,
            window_seconds=DAY_SECONDS,
        )
        if wait is not None:
            raise RateLimited("This address has mailed its maximum of codes for today (UTC).", retry_after=wait)
        message = composing.compose(
            sender=record.email,
            recipient=email,
            subject="Your verification code",
            text=_code_text(record, code, CODE_TTL_SECONDS),
            message_id=composing.new_message_id(self._settings.email_domain),
            now=now,
            auto_submitted=True,
        )
        try:
            mailer.send(message)
        except MailerError as error:
            raise Unavailable("The code could not be mailed; ask again shortly.", retry_after=30) from error
        return ContactChange(self._existing(address_id, email), code_sent=True)

    def verification(
        self, address_id: str, read_token: str | None, email_value: object, code_value: object
    ) -> ContactChange:
        """`verify`, as the change a contact request answers with."""
        return ContactChange(self.verify(address_id, read_token, email_value, code_value), code_sent=False)

    def verify(self, address_id: str, read_token: str | None, email_value: object, code_value: object) -> Contact:
        """Confirm a contact with the code mailed to it; each try spends one attempt first."""
        email = composing.contact_email(email_value, field="email")
        code = code_value if isinstance(code_value, str) else ""
        now = self._clock()
        authenticate(self._table, address_id, read_token, now=now)
        self._require_mailer()
        try:
            pending = self._contacts.spend_attempt(
                address_id, email, now=now, max_attempts=CODE_ATTEMPTS
            )
        except ContactVerified:
            return self._existing(address_id, email)
        if not (len(code) == CODE_DIGITS and code.isascii() and code.isdigit()) or not hmac.compare_digest(
            code_digest(pending.salt, code), pending.digest
        ):
            left = max(0, CODE_ATTEMPTS - pending.attempts)
            raise WrongCode("The code does not match.", attempts_left=left)
        verified = self._contacts.mark_verified(address_id, email, pending.digest, now=now)
        if verified is None:
            raise WrongCode("The code was replaced by a newer one; use the latest code.", attempts_left=0)
        return verified

    def remove(self, address_id: str, read_token: str | None, email_value: object) -> None:
        email = composing.contact_email(email_value, field="email")
        authenticate(self._table, address_id, read_token, now=self._clock())
        if not self._contacts.remove(address_id, email):
            raise NotFound("No contact with this email.", email=email)

    def _require_mailer(self) -> OutboundMailer:
        if self._mailer is None:
            raise OutboundNotConfigured()
        return self._mailer

    def _existing(self, address_id: str, email: str) -> Contact:
        found = self._contacts.get(address_id, email)
        if found is None:
            # Removed by a racing request between the two calls.
            raise NotFound("No contact with this email.", email=email)
        return found[0]


def code_digest(salt: str, code: str) -> str:
    return credentials.digest(f"{salt}:{code}")


def _code_text(record: AddressRecord, code: str, ttl_seconds: int) -> str:
    task = record.name or record.task_id or record.id
    minutes = max(1, ttl_seconds // 60)
    return (
        f"An automated task ({task}) would like to send you email from {record.email}.\n"
        f"\n"
        f"Its verification code is: {code}\n"
        f"\n"
        f"Give this code to the task only if you expect its mail. The code expires in {minutes} minutes.\n"
        f"If you did not expect this message, ignore it: nothing will be sent to you without the code.\n"
    )
