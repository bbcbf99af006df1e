"""What outbound mail needs from the world: a mailer and a contact book.

`OutboundMailer` hands a composed message to whatever carries mail (SES in
AWS, an SMTP relay or an outbox folder under `cairn serve`); `ContactStore`
keeps each address's contacts and their verification codes;
`OutcomeDeadlines` the deadlines of the outcome slots sends reserve. Feed
events (`email.sent` and its outcome) go through `cairn.addresses.ports`.
"""

from __future__ import annotations

from typing import Literal, Protocol, get_args

import msgspec

ContactStatus = Literal["pending", "verified"]
# What a carrier reports of a send, at the hand-off or later (SES's events).
CarrierOutcome = Literal["delivered", "bounced", "complained", "failed"]
CARRIER_OUTCOMES: tuple[CarrierOutcome, ...] = get_args(CarrierOutcome)
# Recorded by the outcome sweep once a send's deadline passed with no report; no carrier gives it.
OUTCOME_UNKNOWN: Literal["outcome_unknown"] = "outcome_unknown"
# The outcome events a send ends with (`email.<outcome>`), one per send.
Outcome = CarrierOutcome | Literal["outcome_unknown"]


class ComposedMessage(msgspec.Struct, frozen=True):
    """A message ready to go: its envelope, its `Message-ID` and its bytes (RFC 5322)."""

    sender: str
    recipient: str
    message_id: str
    raw: bytes
    # Labels the carrier reports back with its outcome events (SES message tags), so an
    # outcome finds its address and send without a lookup; empty for verification codes.
    tags: tuple[tuple[str, str], ...] = ()


class Handoff(msgspec.Struct, frozen=True):
    """What the carrier said when it took a message.

    `outcome` is the final word when the carrier gives it at once (a local
    relay or the outbox: `delivered`); None when it arrives later as an
    event (SES).
    """

    provider_message_id: str
    outcome: CarrierOutcome | None = None


class OutboundMailer(Protocol):
    def send(self, message: ComposedMessage) -> Handoff:
        """Hand the message over; raises `MailerError` when the carrier refused or was unreachable."""


class MailerError(Exception):
    """The carrier did not take the message; `permanent` when asking again cannot help."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class Contact(msgspec.Struct, frozen=True):
    """A person an address may mail, once they have confirmed a code sent to them."""

    email: str
    status: ContactStatus
    created_at: float
    verified_at: float | None = None


class PendingCode(msgspec.Struct, frozen=True):
    """The digest of a contact's current code and what is left of it."""

    salt: str
    digest: str
    expires_at: float
    sent_at: float
    attempts: int


class CodeLimits(msgspec.Struct, frozen=True):
    """What bounds codes and the guesses at them.

    Counted apart from contacts, so removing and adding a contact again
    resets none of them: codes mailed per address and per recipient (from
    all addresses) per UTC day, the spacing between two codes from one
    address to one recipient, and guesses per address and per recipient
    per UTC day (`attempts` for each code that day allows). With them, the
    contacts an address may have.
    """

    codes_per_address: int
    codes_per_recipient: int
    attempts: int
    resend_seconds: int
    max_contacts: int

    @property
    def guesses_per_address(self) -> int:
        return self.codes_per_address * self.attempts

    @property
    def guesses_per_recipient(self) -> int:
        return self.codes_per_recipient * self.attempts


class ContactStore(Protocol):
    """Contacts of an address and their codes, which live and die with the address; what bounds codes outlives both.

    Every write is one transaction that also requires the address to be
    live, so nothing is written under an address once its deletion began.
    """

    def list(self, address_id: str) -> list[Contact]:
        """Every contact, oldest first."""

    def get(self, address_id: str, email: str) -> tuple[Contact, PendingCode | None] | None:
        """One contact and its current code (None once verified), or None."""

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
        """Store `code` for a new contact (`new`, counted against `max_contacts`) or a pending one, counting it.

        Nothing is stored unless every bound holds. Raises `ContactMoved`
        when the contact is not as `new` says (added, removed or verified
        meanwhile), `ContactLimitReached`, `RateLimited` (a bound of
        `limits`) and `Unauthorized` when the address is gone.
        """

    def try_code(
        self, address_id: str, email: str, seen: PendingCode, *, matched: bool, now: float, limits: CodeLimits
    ) -> None:
        """Spend one attempt at `seen`, counting the guess; when `matched`, verify the contact with it.

        Nothing is written unless every bound holds. Raises `ContactMoved`
        when the contact's code or its attempts are no longer `seen`,
        `RateLimited` when the day's guesses are spent and `Unauthorized`
        when the address is gone.
        """

    def remove(self, address_id: str, email: str, *, now: float) -> bool:
        """Remove a contact; False when there was none. Raises `Unauthorized` when the address is gone.

        What bounds codes and guesses stays: a contact added again is mailed
        no sooner, and counted against the same day, as if it had stayed.
        """


class HandoffTurn(msgspec.Struct, frozen=True):
    """Whose turn it is to hand a recorded send to the carrier.

    `yours`: this caller's; `busy`: another caller's, within its lease;
    `done`: nobody's, the carrier had it or refused it (with what it said,
    to record the outcome again if that was lost) or the send is gone.
    `attempt` is the hand-off attempt it is about (1, or more after refusals).
    """

    kind: Literal["yours", "done", "busy"]
    outcome: CarrierOutcome | None = None
    provider_message_id: str | None = None
    attempt: int = 1


class HandoffLedger(Protocol):
    """Which recorded sends have reached the carrier, so a retry finishes a lost hand-off exactly once."""

    def take_turn(self, address_id: str, sequence: int, *, now: float, lease_seconds: float) -> HandoffTurn:
        """Claim the hand-off of the send at `sequence` for `lease_seconds` unless it is done or leased."""

    def done(self, address_id: str, sequence: int, handoff: Handoff, *, now: float, attempt: int) -> None:
        """Record that the carrier had attempt `attempt` of the send, and the outcome it gave at once.

        Nothing is recorded once a later attempt has begun.
        """

    def refused(self, address_id: str, sequence: int, *, now: float, attempt: int) -> None:
        """Record that the carrier refused attempt `attempt` of the send (`failed`).

        A retry may follow with the next attempt; nothing is recorded once a
        later attempt has begun.
        """


class DueOutcome(msgspec.Struct, frozen=True):
    """A send whose outcome slot's deadline passed, found by the outcome sweep."""

    address_id: str
    send_event_id: str
    message_id: str | None
    token: str  # what `done` needs to remove it
    attempt: int = 1  # the send's hand-off attempt whose slot it is


class OutcomeDeadlines(Protocol):
    """When each reserved outcome slot is given back if its outcome never came.

    A deadline is written in the send's own commit (`AppendRequest.outcome_deadline`),
    so no slot is reserved without one; the sweep reads and removes them here.
    """

    def due(self, now: float, limit: int) -> list[DueOutcome]:
        """Up to `limit` deadlines passed at `now`, earliest first."""

    def done(self, item: DueOutcome) -> None:
        """Forget a deadline the sweep has settled."""


class ContactMoved(Exception):
    """The contact is no longer as it was read (added, removed, verified, or its code tried): read it again."""
