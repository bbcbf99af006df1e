"""The SMTP listener of `cairn serve`: mail sent to an address becomes its event.

It plays the part SES plays in AWS. Recipients outside the email domain are
refused at RCPT (it relays nothing); an accepted message is stored under a
new message id with a Received header naming its recipient, as SES stores
it, and then goes through the very ingest code SES deliveries go through.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, cast

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session
from aws_lambda_powertools import Logger

from cairn.email.ingest import Delivery, EmailIngest
from cairn.email.ports import RawMessageStore

logger = Logger(service="cairn")
# The recipients one message may have: what RFC 5321 §4.5.3.1.8 asks a server to take, and no more.
MAX_RECIPIENTS = 100
# Sessions open at once, in all and from one peer host. Each holds a file descriptor, which
# the HTTP server shares, and up to a message's worth of memory while its DATA arrives; a
# sender turned away at the greeting (421) keeps its mail and tries again later.
MAX_SESSIONS = 50
MAX_SESSIONS_PER_PEER = 10


def new_message_id() -> str:
    """Lower-case letters and digits like SES's ids, with 160 random bits."""
    return secrets.token_hex(20)


class MailHandler:
    """aiosmtpd handler: accept mail for the email domain, store it, ingest it."""

    def __init__(self, ingest: EmailIngest, raw_messages: RawMessageStore, domain: str) -> None:
        self._ingest = ingest
        self._raw_messages = raw_messages
        self._domain = domain.lower()

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        if address.rpartition("@")[2].lower() != self._domain:
            return f"550 5.7.1 Relaying denied: only mail for @{self._domain} is accepted"
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return f"452 4.5.3 Too many recipients: at most {MAX_RECIPIENTS} a message"
        address_id = self._ingest.recipient_address(address)
        if address_id is not None:
            # Only asked here: the message is counted at DATA, so a sender that names an
            # address and then drops the message (RSET, QUIT) spends none of its rate.
            try:
                spent = await asyncio.get_running_loop().run_in_executor(
                    None, self._ingest.message_rate_spent, address_id
                )
            except Exception:
                logger.exception("mail rate not read", extra={"recipient": address})
                return "451 4.3.0 Temporary failure; try again later"
            if spent:
                # A temporary refusal: the sending server keeps the message and tries again later.
                return "450 4.7.1 Too many messages for this address; try again later"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        message_id = new_message_id()
        # The controller leaves `decode_data` off, so aiosmtpd hands over the content as bytes.
        content = cast(bytes, envelope.content)
        raw = received_header(session, message_id, envelope.rcpt_tos, self._domain) + content
        try:
            # Storage calls block; the listener keeps serving other clients meanwhile.
            taken = await asyncio.get_running_loop().run_in_executor(
                None, self._deliver, message_id, raw, list(envelope.rcpt_tos)
            )
        except Exception:
            logger.exception("email not stored", extra={"message_id": message_id})
            return "451 4.3.0 Temporary failure; try again later"
        if not taken:
            return "450 4.7.1 Too many messages for its addresses; try again later"
        return f"250 2.0.0 OK: queued as {message_id}"

    def _deliver(self, message_id: str, raw: bytes, recipients: list[str]) -> bool:
        """Store and ingest the message, counted against each address's mail rate; False when no address
        has any rate left (RCPT asked, but other messages took it since): nothing is stored, the sender retries."""
        address_ids, over_rate = self._ingest.count_recipients(recipients)
        if address_ids and over_rate.issuperset(address_ids):
            return False
        self._raw_messages.save(message_id, raw)
        self._ingest.ingest(Delivery(message_id=message_id, recipients=recipients, over_rate=over_rate))
        return True


def received_header(session: Session, message_id: str, recipients: list[str], domain: str) -> bytes:
    """The trace line a receiving server prepends (RFC 5321 §4.4).

    A lone recipient is named in its `for` clause, which is how a replay
    later recognises a blind-copied message as delivered to it.
    """
    peer = session.peer[0] if session.peer else "unknown"
    named = f" for <{recipients[0]}>" if len(recipients) == 1 else ""
    stamp = format_datetime(datetime.now(UTC))
    line = f"Received: from {session.host_name or 'unknown'} ([{peer}]) by {domain} (Cairn) with SMTP id {message_id}"
    return f"{line}{named}; {stamp}\r\n".encode("utf-8", "replace")


class SessionCount:
    """The sessions open now, in all and per peer host; only the listener's event loop touches it."""

    def __init__(self, *, most: int = MAX_SESSIONS, most_per_peer: int = MAX_SESSIONS_PER_PEER) -> None:
        self._most = most
        self._most_per_peer = most_per_peer
        self._per_peer: Counter[str] = Counter()

    def __len__(self) -> int:
        return self._per_peer.total()

    def open(self, peer: str) -> bool:
        """Count a new session from `peer`, or False when either cap is reached."""
        if len(self) >= self._most or self._per_peer[peer] >= self._most_per_peer:
            return False
        self._per_peer[peer] += 1
        return True

    def close(self, peer: str) -> None:
        self._per_peer[peer] -= 1
        if self._per_peer[peer] <= 0:
            del self._per_peer[peer]


class CappedSMTP(SMTP):
    """aiosmtpd's SMTP session, turned away at the greeting when `SessionCount` is full."""

    def __init__(self, handler: MailHandler, sessions: SessionCount, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._sessions = sessions
        self._counted_peer: str | None = None
        self._turned_away = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if peer else "unknown"
        if not self._sessions.open(host):
            self._turned_away = True
            cast(asyncio.WriteTransport, transport).write(
                f"421 4.7.0 {self.hostname} Too many connections; try again later\r\n".encode()
            )
            transport.close()
            return
        self._counted_peer = host
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        if self._turned_away:
            return  # aiosmtpd never saw this connection
        if self._counted_peer is not None:
            self._sessions.close(self._counted_peer)
            self._counted_peer = None
        super().connection_lost(error)


class Listener(Controller):
    """aiosmtpd's threaded controller, making `CappedSMTP` sessions that share one `SessionCount`."""

    def __init__(self, handler: MailHandler, sessions: SessionCount, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._sessions = sessions

    def factory(self) -> SMTP:
        return CappedSMTP(self.handler, self._sessions, **self.SMTP_kwargs)


def start_listener(
    ingest: EmailIngest, raw_messages: RawMessageStore, *, domain: str, host: str, port: int
) -> Controller:
    """A running SMTP listener; raises OSError when the port is taken."""
    handler = MailHandler(ingest, raw_messages, domain)
    controller = Listener(handler, SessionCount(), hostname=host, port=port, server_hostname=domain)
    controller.start()
    return controller
