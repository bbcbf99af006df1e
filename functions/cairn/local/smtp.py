"""The SMTP listener of `cairn serve`: mail sent to an address becomes its event.

It plays the part SES plays in AWS. Recipients outside the email domain are
refused at RCPT (it relays nothing); an accepted message is stored under a
new message id with a Received header naming its recipient, as SES stores
it, and then goes through the very ingest code SES deliveries go through.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import cast

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session
from aws_lambda_powertools import Logger

from cairn.email.ingest import Delivery, EmailIngest
from cairn.email.ports import RawMessageStore
from cairn.errors import RateLimited

logger = Logger(service="cairn")
# The recipients one message may have: what RFC 5321 §4.5.3.1.8 asks a server to take, and no more.
MAX_RECIPIENTS = 100


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
        listed = {self._ingest.recipient_address(recipient) for recipient in envelope.rcpt_tos}
        if address_id is not None and address_id not in listed:  # an address listed twice counts once
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._ingest.count_message, address_id)
            except RateLimited:
                # A temporary refusal: the sending server keeps the message and tries again later.
                return "450 4.7.1 Too many messages for this address; try again later"
            except Exception:
                logger.exception("mail rate not counted", extra={"recipient": address})
                return "451 4.3.0 Temporary failure; try again later"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        message_id = new_message_id()
        # The controller leaves `decode_data` off, so aiosmtpd hands over the content as bytes.
        content = cast(bytes, envelope.content)
        raw = received_header(session, message_id, envelope.rcpt_tos, self._domain) + content
        try:
            # Storage calls block; the listener keeps serving other clients meanwhile.
            await asyncio.get_running_loop().run_in_executor(
                None, self._deliver, message_id, raw, list(envelope.rcpt_tos)
            )
        except Exception:
            logger.exception("email not stored", extra={"message_id": message_id})
            return "451 4.3.0 Temporary failure; try again later"
        return f"250 2.0.0 OK: queued as {message_id}"

    def _deliver(self, message_id: str, raw: bytes, recipients: list[str]) -> None:
        self._raw_messages.save(message_id, raw)
        self._ingest.ingest(Delivery(message_id=message_id, recipients=recipients, rate_counted=True))


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


def start_listener(
    ingest: EmailIngest, raw_messages: RawMessageStore, *, domain: str, host: str, port: int
) -> Controller:
    """A running SMTP listener; raises OSError when the port is taken."""
    controller = Controller(MailHandler(ingest, raw_messages, domain), hostname=host, port=port, server_hostname=domain)
    controller.start()
    return controller
