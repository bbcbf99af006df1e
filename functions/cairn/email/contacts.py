"""Contacts an address may mail: a six-digit code proves the person reads that mailbox.

The code is mailed from the address's own email, saying that an automated
task asks and that ignoring it is safe. It is never returned and stored only
as a salted digest; it expires after 15 minutes, allows 5 tries, and asking
again replaces it (not sooner than a minute after the last code from this
address to this email). Codes are limited per address and per recipient
(from all addresses) per UTC day, and so are tries: 5 for each code the day
allows. None of these bounds is kept on the contact, so removing it and
adding it again resets none of them, and a refused request stores nothing.

The mail carries nothing a requester chose but a label of at most
`LABEL_MAX_CHARS` letters and spaces (`code_label`): a stranger's mailbox
receives it from Cairn's domain, so it must not carry a link, an address, a
number or a paragraph of someone else's text.
"""

from __future__ import annotations

import hmac
import secrets
import unicodedata
from dataclasses import dataclass

from cairn import credentials
from cairn.addresses.access import authenticate
from cairn.addresses.models import AddressRecord
from cairn.addresses.ports import AddressStore
from cairn.clock import Clock
from cairn.email import composing
from cairn.email.outbound_ports import (
    CodeLimits,
    Contact,
    ContactMoved,
    ContactStore,
    MailerError,
    OutboundMailer,
    PendingCode,
)
from cairn.errors import (
    CodeExpired,
    MailRefused,
    NotFound,
    OutboundNotConfigured,
    TooManyAttempts,
    Unavailable,
    UnknownRecipient,
    WrongCode,
)
from cairn.settings import Settings

CODE_DIGITS = 6
CODE_TTL_SECONDS = 15 * 60
CODE_ATTEMPTS = 5
RESEND_SECONDS = 60
LABEL_MAX_CHARS = 32
# Reads of a contact that another request changed before this one's write; each loss means that one won.
_ROUNDS = 8


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
        mailer: OutboundMailer | None,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._table = table
        self._contacts = contacts
        self._mailer = mailer
        self._settings = settings
        self._clock = clock
        self._limits = CodeLimits(
            codes_per_address=settings.outbound_verifications_per_day,
            codes_per_recipient=settings.outbound_verifications_per_recipient_per_day,
            attempts=CODE_ATTEMPTS,
            resend_seconds=RESEND_SECONDS,
            max_contacts=settings.outbound_max_contacts,
        )

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
        # Composed before anything is written: a message that cannot be made changes nothing.
        sender, reply_to = composing.senders(record.email, self._settings.outbound_from)
        message = composing.compose(
            sender=sender,
            reply_to=reply_to,
            recipient=email,
            subject="Your verification code",
            text=_code_text(record, code, CODE_TTL_SECONDS),
            message_id=composing.new_message_id(self._settings.email_domain),
            now=now,
            auto_submitted=True,
        )
        for _ in range(_ROUNDS):
            # What the write expects to find; its conditions decide, and a contact changed meanwhile is read again.
            found = self._contacts.get(address_id, email)
            if found is not None and found[0].status == "verified":
                return ContactChange(found[0], code_sent=False)
            try:
                self._contacts.put_code(
                    address_id,
                    email,
                    pending,
                    new=found is None,
                    now=now,
                    address_expires_at=record.expires_at,
                    limits=self._limits,
                )
            except ContactMoved:
                continue
            contact = found[0] if found is not None else Contact(email, "pending", created_at=round(now, 3))
            break
        else:
            raise Unavailable("This contact is changing too fast; retry shortly.")
        try:
            mailer.send(message)
        except MailerError as error:
            if error.permanent:
                raise MailRefused(
                    f"The code could not be mailed, and asking again will not help: {error.reason[:300]}"
                ) from error
            # The code stands as sent, so the next may be asked for once the resend spacing has passed.
            raise Unavailable("The code could not be mailed; ask again shortly.", retry_after=RESEND_SECONDS) from error
        return ContactChange(contact, code_sent=True)

    def verification(
        self, address_id: str, read_token: str | None, email_value: object, code_value: object
    ) -> ContactChange:
        """`verify`, as the change a contact request answers with."""
        return ContactChange(self.verify(address_id, read_token, email_value, code_value), code_sent=False)

    def verify(self, address_id: str, read_token: str | None, email_value: object, code_value: object) -> Contact:
        """Confirm a contact with the code mailed to it; each try, right or wrong, spends an attempt and a guess."""
        email = composing.contact_email(email_value, field="email")
        code = code_value if isinstance(code_value, str) else ""
        now = self._clock()
        authenticate(self._table, address_id, read_token, now=now)
        self._require_mailer()
        for _ in range(_ROUNDS):
            found = self._contacts.get(address_id, email)
            if found is None:
                raise UnknownRecipient("No contact with this email; ask for a code first.")
            contact, pending = found
            if pending is None:
                return contact
            if pending.attempts >= CODE_ATTEMPTS:
                raise TooManyAttempts(
                    f"All {CODE_ATTEMPTS} attempts at this code are used; ask for a new code.",
                    max_attempts=CODE_ATTEMPTS,
                )
            if pending.expires_at <= now:
                raise CodeExpired("The code has expired; ask for a new one.")
            matched = (
                len(code) == CODE_DIGITS
                and code.isascii()
                and code.isdigit()
                and hmac.compare_digest(code_digest(pending.salt, code), pending.digest)
            )
            try:
                self._contacts.try_code(address_id, email, pending, matched=matched, now=now, limits=self._limits)
            except ContactMoved:
                continue
            if not matched:
                raise WrongCode("The code does not match.", attempts_left=CODE_ATTEMPTS - pending.attempts - 1)
            return Contact(contact.email, "verified", created_at=contact.created_at, verified_at=round(now, 3))
        raise Unavailable("This contact is changing too fast; retry shortly.")

    def remove(self, address_id: str, read_token: str | None, email_value: object) -> None:
        email = composing.contact_email(email_value, field="email")
        now = self._clock()
        authenticate(self._table, address_id, read_token, now=now)
        if not self._contacts.remove(address_id, email, now=now):
            raise NotFound("No contact with this email.", email=email)

    def _require_mailer(self) -> OutboundMailer:
        if self._mailer is None:
            raise OutboundNotConfigured()
        return self._mailer


def code_digest(salt: str, code: str) -> str:
    return credentials.digest(f"{salt}:{code}")


def code_label(record: AddressRecord) -> str | None:
    """The task's name for itself as the code mail may show it: letters and single spaces, short, or nothing.

    Letters are folded to ASCII (accents dropped, look-alike forms such as
    full-width ones normalized, other scripts left out) and everything else
    becomes a space, so no dot, colon, slash, `@` or digit survives: the
    label can name no link, mailbox, phone number or code of its own.
    """
    chosen = record.name or record.task_id
    if not chosen:
        return None
    letters = unicodedata.normalize("NFKD", chosen).encode("ascii", "ignore").decode()
    words = "".join(char if char.isalpha() else " " for char in letters).split()
    label = ""
    for word in words:
        longer = f"{label} {word}" if label else word
        if len(longer) > LABEL_MAX_CHARS:
            break
        label = longer
    return label or None


def _code_text(record: AddressRecord, code: str, ttl_seconds: int) -> str:
    minutes = max(1, ttl_seconds // 60)
    label = code_label(record)
    # The label is the requester's word, and the mail says so.
    named = f' (it calls itself "{label}")' if label else ""
    return (
        f"An automated task{named} would like to send you email from {record.email}.\n"
        f"\n"
        f"Its verification code is: {code}\n"
        f"\n"
        f"Give this code to the task only if you expect its mail. The code expires in {minutes} minutes.\n"
        f"If you did not expect this message, ignore it: nothing will be sent to you without the code.\n"
    )
