"""Outbound messages as bytes: plain text, one recipient, headers that cannot be injected.

Built with the standard library's `email` package (`policy.SMTP`: CRLF
lines, RFC 2047 words for non-ASCII subjects). Every value that becomes a
header is checked here first: a line break or another control character is
refused (`HeaderInjection`), never folded or stripped, so what a caller
sends is either the header it meant or an error.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime

import msgspec

from cairn.email.outbound_ports import ComposedMessage
from cairn.errors import HeaderInjection, InvalidRequest
from cairn.settings import EMAIL_PATTERN

MAX_EMAIL_LENGTH = 254
MAX_SUBJECT_CHARS = 500
MAX_REFERENCES = 20
_EMAIL = re.compile(EMAIL_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")
# An RFC 2047 encoded word, as leniently as Python's header parser finds one: a header value holding one is
# decoded on its way out, to text that may hold line breaks (CVE-2024-6923 before Python 3.11.10) or
# characters no header can carry (an error).
_ENCODED_WORD = re.compile(r"=\?.*\?=", re.DOTALL)
_MESSAGE_ID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]{1,250}>")


class Thread(msgspec.Struct, frozen=True):
    """The received mail a message answers: its `Message-ID`, `References` and subject."""

    message_id: str | None
    references: tuple[str, ...]
    subject: str


def contact_email(value: object, *, field: str) -> str:
    """One plain address (`name@example.com`), lower-cased; the refusals a caller can act on."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be one email address.", field=field)
    if _CONTROL.search(value):
        raise HeaderInjection(f"{field} must not contain line breaks or control characters.", field=field)
    text = value.strip()
    # RFC 2047 §5: no encoded word in an address.
    if len(text) > MAX_EMAIL_LENGTH or not _EMAIL.fullmatch(text) or _ENCODED_WORD.search(text):
        raise InvalidRequest(f"{field} must be one plain email address like name@example.com.", field=field)
    return text.lower()


def subject_line(value: object) -> str:
    """A one-line subject of at most `MAX_SUBJECT_CHARS` characters."""
    if not isinstance(value, str):
        raise InvalidRequest("subject must be a string.", field="subject")
    if _CONTROL.search(value):
        raise HeaderInjection("subject must be one line, without control characters.", field="subject")
    if len(value) > MAX_SUBJECT_CHARS:
        raise InvalidRequest(f"subject must be at most {MAX_SUBJECT_CHARS} characters.", field="subject")
    if _ENCODED_WORD.search(value):
        raise HeaderInjection(
            "subject must be the text itself, without an encoded word (=?charset?q?...?=): Cairn encodes it.",
            field="subject",
        )
    return value


def reply_subject(thread: Thread) -> str:
    """`Re: <subject>` of the mail answered, once; what would read as an encoded word is opened with a space."""
    original = _CONTROL.sub(" ", thread.subject).replace("=?", "= ?").strip()[: MAX_SUBJECT_CHARS - 4]
    return original if original.lower().startswith("re:") else f"Re: {original}".rstrip()


def thread_headers(thread: Thread | None) -> tuple[str | None, tuple[str, ...]]:
    """`In-Reply-To` and `References` of a reply to `thread` (RFC 5322 §3.6.4), as the message carries them.

    None and () when there is no thread or its `Message-ID` is not one a
    header can carry; the references keep the last `MAX_REFERENCES`, ending
    with the mail answered.
    """
    if thread is None or not thread.message_id or not _MESSAGE_ID.fullmatch(thread.message_id):
        return None, ()
    earlier = [ref for ref in thread.references if _MESSAGE_ID.fullmatch(ref)]
    return thread.message_id, (*earlier[-(MAX_REFERENCES - 1) :], thread.message_id)


def senders(address_email: str, operator_sender: str | None) -> tuple[str, str | None]:
    """`From` and `Reply-To` of an address's mail: its own email, or the operator's sender answered to it."""
    if operator_sender is None:
        return address_email, None
    return operator_sender, address_email


def new_message_id(domain: str) -> str:
    """A `Message-ID` with 128 random bits, on the sending domain."""
    return f"<{secrets.token_hex(16)}@{domain}>"


def compose(
    *,
    sender: str,
    recipient: str,
    subject: str,
    text: str,
    message_id: str,
    now: float,
    thread: Thread | None = None,
    reply_to: str | None = None,
    auto_submitted: bool = False,
) -> ComposedMessage:
    """The message's bytes; `thread` adds `In-Reply-To` and `References` (`thread_headers`)."""
    message = EmailMessage(policy=policy.SMTP)
    message["From"] = sender
    message["To"] = recipient
    if reply_to is not None:
        message["Reply-To"] = reply_to
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    message["Message-ID"] = message_id
    in_reply_to, references = thread_headers(thread)
    if in_reply_to is not None:
        message["In-Reply-To"] = in_reply_to
        message["References"] = " ".join(references)
    if auto_submitted:
        # RFC 3834: no vacation or other automatic answer should come back to it.
        message["Auto-Submitted"] = "auto-generated"
    message.set_content(text, subtype="plain", charset="utf-8", cte="quoted-printable")
    return ComposedMessage(sender=sender, recipient=recipient, message_id=message_id, raw=message.as_bytes())
