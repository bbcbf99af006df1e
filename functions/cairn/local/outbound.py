"""Where `cairn serve` sends mail: a real SMTP relay, or `.eml` files in an outbox folder.

Both take what the send use case composed, byte for byte, and report
`delivered` at once (a relay that accepted the message has taken it on; a
file written is as delivered as mail gets offline), so the same send code
records its outcome as SES's events would.
"""

from __future__ import annotations

import smtplib
from pathlib import Path

from cairn.disk import write_durably
from cairn.email.outbound_ports import ComposedMessage, Handoff, MailerError

SMTP_TIMEOUT_SECONDS = 30


class SmtpRelayMailer:
    """Hands each message to an SMTP server (`--smtp-relay HOST:PORT`), one connection per message."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port

    def send(self, message: ComposedMessage) -> Handoff:
        try:
            with smtplib.SMTP(self._host, self._port, timeout=SMTP_TIMEOUT_SECONDS) as relay:
                refused = relay.sendmail(message.sender, [message.recipient], message.raw)
        except smtplib.SMTPRecipientsRefused as error:
            raise MailerError(f"relay refused the recipient: {error.recipients}", permanent=True) from error
        except smtplib.SMTPResponseException as error:
            permanent = 500 <= error.smtp_code < 600
            raise MailerError(f"relay answered {error.smtp_code}", permanent=permanent) from error
        except (OSError, smtplib.SMTPException) as error:
            raise MailerError(f"relay unreachable: {error}", permanent=False) from error
        if refused:
            raise MailerError(f"relay refused the recipient: {refused}", permanent=True)
        return Handoff(provider_message_id=message.message_id, outcome="delivered")


class OutboxMailer:
    """Writes each message to `<folder>/<message id>.eml` (owner-only), where a person can open it."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def send(self, message: ComposedMessage) -> Handoff:
        name = message.message_id.strip("<>").replace("@", "_at_").replace("/", "_")
        try:
            self._folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_durably(self._folder / f"{name}.eml", message.raw, exclusive=True)
        except OSError as error:
            raise MailerError(f"outbox not writable: {error}", permanent=False) from error
        return Handoff(provider_message_id=message.message_id, outcome="delivered")


def parse_relay(value: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets) → (host, port); ValueError when malformed."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)
