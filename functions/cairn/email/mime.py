"""Read an inbound message as Cairn shows it: headers, bodies, attachments.

Parsing uses the standard library's `email` package with `policy.default`.
Mail is written by strangers and is often malformed, so every field is read
on its own: one that cannot be read stays empty and the rest still arrive.

Attachment ids are positions (`att_1`, `att_2`, ...) in a fixed walk of the
message, so a download finds the same part by parsing the same bytes again.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Callable, Iterator
from datetime import UTC
from email import errors, policy
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser
from email.policy import EmailPolicy
from email.utils import getaddresses
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from cairn import charsets, jsontext
from cairn.clock import iso

T = TypeVar("T")

ATTACHMENT_PREFIX = "att_"
# Bounds on what one message may cost to read. Mail is written by strangers: past a bound the
# event says what was cut (`truncated_fields`) and the whole message stays stored.
MAX_DEPTH = 32  # multipart levels followed
MAX_PARTS = 500  # leaf parts looked at
MAX_HEADER_CHARS = 16_384  # of one header field's values parsed (address lists parse slowly)
MAX_CONTENT_HEADER_CHARS = 1_000  # of a Content-* value parsed: its parser is quadratic in what it finds wrong
MAX_BOUNDARY_LINES = 5_000  # lines that may open a part: past them the parser would build every part first
MAX_LINES = 1_000_000  # of a message parsed whole: the parser holds every line (30 MiB of empty ones took 1.3 GB)
MAX_CONTAINERS = 200  # multipart and message parts: each nests the parser's recursion a level deeper
_CONTAINER = re.compile(rb"content-type:\s*(?:multipart|message)/", re.IGNORECASE)
MAX_EVENT_BYTES = 2_000_000  # what an event's data may take in an answer, escaped as Lambda carries it
MAX_HEADER_TEXT = 2_000  # characters kept of a subject or an id
MAX_ADDRESSES = 100  # per address field
MAX_REFERENCES = 100
MAX_FILENAME_LENGTH = 255
FALLBACK_CONTENT_TYPE = "application/octet-stream"

_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
_CHARSET = re.compile(r"[A-Za-z0-9._:+-]{1,40}")
# The `for <address>` clause a receiving server writes into its Received header.
_RECEIVED_FOR = re.compile(r"\bfor\s+<?([^\s<>;@]+@[^\s<>;@]+)>?\s*;", re.IGNORECASE)
_DELIVERY_HEADERS = ("To", "Cc", "Delivered-To", "X-Original-To")
# Input bytes one decoded character may take, at most, in any codec Python knows (`\U0001f600` in an escape codec).
_BYTES_PER_CHARACTER = 10


class AttachmentFile(msgspec.Struct, frozen=True):
    """One attachment's decoded bytes with what an HTTP download needs."""

    filename: str
    content_type: str
    data: bytes


class StructureTooDeep(errors.MessageDefect):
    """The parts nest too deeply for the parser, or are too many: only the headers were read."""


if TYPE_CHECKING:
    _DefaultPolicy = EmailPolicy[EmailMessage]
else:  # not subscriptable when running
    _DefaultPolicy = EmailPolicy


class _TolerantPolicy(_DefaultPolicy):
    """`policy.default`, except that a header the parser cannot read is kept as its text.

    The parser reads Content-Type while it splits parts, and some hostile
    values raise from deep inside the header parser (`x*1*`, an encoded word
    that decodes to a lone surrogate): that would cost the whole message on
    every retry. Content-* values are cut at `MAX_CONTENT_HEADER_CHARS` and
    each one is parsed once however often it is read.
    """

    def header_fetch_parse(self, name: str, value: str) -> Any:
        if name.lower().startswith("content-") and not hasattr(value, "name"):  # a header object is parsed
            return _content_header(name, value[:MAX_CONTENT_HEADER_CHARS])
        return _read_header(name, value)


def _read_header(name: str, value: str) -> Any:
    """The header as `policy.default` reads it, or its text when that raises."""
    try:
        return policy.default.header_fetch_parse(name, value)
    except Exception:
        return _unfold(_clean(value))


_content_header = lru_cache(maxsize=1024)(_read_header)


TOLERANT = _TolerantPolicy()


def parse(raw: bytes) -> EmailMessage:
    """The message tree; malformations are recorded as defects, never raised.

    More lines that may open a part than `MAX_BOUNDARY_LINES` (the parser
    builds every part before any bound applies), more lines than `MAX_LINES`,
    or more containers than `MAX_CONTAINERS` (it recurses per level, so how
    deep it could follow would depend on the caller's stack: a message listed
    at ingest could be unreadable at download) leave a message of headers
    only, marked with `StructureTooDeep`.
    """
    bounded = raw.count(b"\n--") <= MAX_BOUNDARY_LINES and raw.count(b"\n") <= MAX_LINES
    if bounded and len(_CONTAINER.findall(raw)) <= MAX_CONTAINERS:
        try:
            return BytesParser(policy=TOLERANT).parsebytes(raw)
        except RecursionError:
            pass
    message = parse_headers(raw)
    message.defects.append(StructureTooDeep())
    return message


def parse_headers(raw: bytes) -> EmailMessage:
    """The message's headers alone, read from its header block: the parser's own `headersonly` still reads
    every line of the body (seconds for a message of 30 MiB of empty lines)."""
    ends = [found for found in (raw.find(b"\r\n\r\n"), raw.find(b"\n\n")) if found >= 0]
    return BytesParser(policy=TOLERANT).parsebytes(raw[: min(ends) + 2] if ends else raw, headersonly=True)


def content(message: EmailMessage, *, text_max_bytes: int) -> dict[str, Any]:
    """The `email.received` event data that the message itself supplies.

    `text` and `html` are cut at `text_max_bytes` UTF-8 bytes each, headers
    and the part walk at the bounds above; `truncated_fields` names every
    field that was cut (`truncated` says whether any was). The full message
    stays stored.
    """
    cut: list[str] = []
    readable = not any(isinstance(defect, StructureTooDeep) for defect in message.defects)
    text_part, html_part = _body_parts(message) if readable else (None, None)
    text = _capped("text", _tolerant(lambda: _decoded_text(text_part, text_max_bytes), None), text_max_bytes, cut)
    html = _capped("html", _tolerant(lambda: _decoded_text(html_part, text_max_bytes), None), text_max_bytes, cut)
    senders = _address_field(message, "From", "from", cut)
    references = (_text_field(message, "References", "references", cut, limit=MAX_HEADER_CHARS) or "").split()
    if len(references) > MAX_REFERENCES:
        references = references[:MAX_REFERENCES]
        cut.append("references")
    parts, all_parts = _attachment_parts(message, (text_part, html_part)) if readable else ([], False)
    if not all_parts:
        cut.append("parts")  # bodies and attachments past a bound were not read
    return _within_budget(
        {
            "from": ", ".join(senders) or None,
            "to": _address_field(message, "To", "to", cut),
            "cc": _address_field(message, "Cc", "cc", cut),
            "subject": _text_field(message, "Subject", "subject", cut),
            "date": _tolerant(lambda: _date(message), None),
            "internet_message_id": _text_field(message, "Message-ID", "internet_message_id", cut),
            "in_reply_to": _text_field(message, "In-Reply-To", "in_reply_to", cut),
            "references": references,
            "text": text,
            "html": html,
            "attachments": [
                {
                    "id": attachment_id,
                    "filename": _filename(part, attachment_id),
                    "size": len(_payload(part)),
                    "content_type": _content_type(part),
                }
                for attachment_id, part in parts
            ],
        },
        cut,
    )


# Fields given up, in this order, while an event's data is past `MAX_EVENT_BYTES`: what is left (a subject, ids,
# 100 senders and 500 attachments' names, each bounded) stays far below it.
_SPARED_LAST = ("html", "text", "cc", "to", "references")


def _within_budget(data: dict[str, Any], cut: list[str]) -> dict[str, Any]:
    """`data` within `MAX_EVENT_BYTES` once answered, so the event fits a transaction and a page of the feed.

    Text escapes up to seven times its size there (control characters, quotes), so fields within their own
    bounds can still add up past it: the largest go first, emptied, and join `truncated_fields`.
    """
    for field in _SPARED_LAST:
        if not data[field]:
            continue
        if jsontext.value_sent_size(data) <= MAX_EVENT_BYTES:
            break
        data[field] = [] if isinstance(data[field], list) else None
        cut.append(field)
    data["truncated"] = bool(cut)
    data["truncated_fields"] = sorted(set(cut))
    return data


def message_id(message: EmailMessage) -> str | None:
    """The `Message-ID` header (within `MAX_HEADER_TEXT` characters), or None when it is missing or unreadable."""
    return _text_field(message, "Message-ID", "internet_message_id", [])


def attachment(message: EmailMessage, attachment_id: str) -> AttachmentFile | None:
    """The attachment `content` listed under `attachment_id`, or None."""
    for candidate_id, part in _attachment_parts(message, _body_parts(message))[0]:
        if candidate_id == attachment_id:
            media_type = _content_type(part)
            charset = _tolerant(part.get_content_charset, None)
            if media_type.startswith("text/") and charset and _CHARSET.fullmatch(charset):
                media_type += f"; charset={charset}"
            return AttachmentFile(_filename(part, attachment_id), media_type, _payload(part))
    return None


def recipients_named(message: EmailMessage) -> set[str]:
    """Lower-cased addresses the message says it was delivered to.

    Addressee headers plus the `for` clauses of Received headers, which
    receiving servers (SES, `cairn serve`) write for envelope recipients
    that no visible header names.
    """
    values = [value for name in _DELIVERY_HEADERS for value in _raw_values(message, name)]
    named = {address for _, address in getaddresses(values) if "@" in address}
    for received in _raw_values(message, "Received"):
        named.update(_RECEIVED_FOR.findall(received[:MAX_HEADER_CHARS]))
    return {address.lower() for address in named}


# -- bodies ---------------------------------------------------------------------


def _body_parts(message: EmailMessage) -> tuple[MIMEPart | None, MIMEPart | None]:
    """The plain-text and HTML bodies a mail reader would show.

    A message that claims to be multipart but could not be split (no
    boundary) is shown as text, which is what it is.
    """
    text = _tolerant(lambda: message.get_body(preferencelist=("plain",)), None)
    html = _tolerant(lambda: message.get_body(preferencelist=("html",)), None)
    if text is None and html is None and not message.is_multipart():
        if message.get_content_maintype() in ("text", "multipart"):
            text = message
    return text, html


def _decoded_text(part: MIMEPart | None, max_bytes: int) -> str | None:
    """The part's text, from no more of its bytes than `max_bytes` UTF-8 bytes of text can take in any codec
    (past them, the text decoded is longer than `max_bytes`, so `_capped` says it was cut)."""
    if part is None:
        return None
    payload = _decoded_bytes(part)[: (max_bytes + 1) * _BYTES_PER_CHARACTER]
    # Undeclared 8-bit text is UTF-8 far more often than anything else.
    charset = charsets.declared_codec(part.get_content_charset() or "utf-8") or "utf-8"
    try:
        text = payload.decode(charset, "replace")
    except (LookupError, ValueError):  # not a text codec
        text = payload.decode("utf-8", "replace")
    # UTF-7 and the escape codecs decode a stranger's bytes to lone surrogates, which no event can hold.
    return jsontext.valid_text(text).replace("\r\n", "\n")


def _capped(field: str, text: str | None, limit: int, cut: list[str]) -> str | None:
    """`text` within `limit` UTF-8 bytes; `field` joins `cut` when it had to be shortened."""
    if text is None or len(text) <= limit // 4:
        return text
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    cut.append(field)
    return encoded[:limit].decode("utf-8", "ignore")


# -- attachments ----------------------------------------------------------------


def _attachment_parts(
    message: EmailMessage, bodies: tuple[MIMEPart | None, MIMEPart | None]
) -> tuple[list[tuple[str, MIMEPart]], bool]:
    """Every part that is not a shown body, numbered in walk order; and whether the walk saw every part."""
    shown = {id(part) for part in bodies if part is not None}
    leaves, complete = _leaves(message)
    found = [part for part in leaves if id(part) not in shown and _tolerant(partial(_is_attachment, part), False)]
    return [(f"{ATTACHMENT_PREFIX}{index}", part) for index, part in enumerate(found, start=1)], complete


def _leaves(message: MIMEPart) -> tuple[list[MIMEPart], bool]:
    """Parts that hold content, depth first, within `MAX_DEPTH` and `MAX_PARTS`; and whether none was left out.

    An attached message is one leaf, not opened. The walk keeps its own
    stack, so no nesting can exhaust Python's.
    """
    leaves: list[MIMEPart] = []
    pending: list[tuple[MIMEPart, int]] = [(message, 0)]
    complete = True
    while pending:
        part, depth = pending.pop()
        if _tolerant(part.get_content_maintype, "application") != "multipart":
            if len(leaves) == MAX_PARTS:
                return leaves, False
            leaves.append(part)
        elif depth == MAX_DEPTH:
            complete = False
        else:
            children = _tolerant(partial(_children, part), list[MIMEPart]())
            pending.extend((child, depth + 1) for child in reversed(children))
    return leaves, complete


def _children(part: MIMEPart) -> list[MIMEPart]:
    return list(part.iter_parts())


def _is_attachment(part: MIMEPart) -> bool:
    # Text without a name that is not the shown body is a fragment of the
    # body (a signature, a footer), not a file someone attached.
    return (
        part.get_content_type() not in ("text/plain", "text/html")
        or part.get_content_disposition() == "attachment"
        or part.get_filename() is not None
    )


def _payload(part: MIMEPart) -> bytes:
    if part.is_multipart():
        # An attached message (message/rfc822): its own bytes are the file.
        return _tolerant(lambda: _attached_message_bytes(part), b"")
    return _tolerant(lambda: _decoded_bytes(part), b"")


def _decoded_bytes(part: MIMEPart) -> bytes:
    """A leaf's content with its transfer encoding undone."""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _attached_message_bytes(part: MIMEPart) -> bytes:
    attached = part.get_payload(0)
    # Its headers as they came: refolding them (the default) takes time quadratic in a long address list.
    return attached.as_bytes(policy=_AS_SENT) if isinstance(attached, Message) else b""


_AS_SENT = policy.default.clone(refold_source="none")


def _filename(part: MIMEPart, attachment_id: str) -> str:
    """The sender's file name without any folders, or one made from the id."""
    name = _clean(_tolerant(part.get_filename, None) or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(character for character in name if character.isprintable()).strip()
    if name.strip("."):
        return name[:MAX_FILENAME_LENGTH]
    media_type = _content_type(part)
    extension = ".eml" if media_type == "message/rfc822" else mimetypes.guess_extension(media_type) or ".bin"
    return attachment_id + extension


def _content_type(part: MIMEPart) -> str:
    media_type = _tolerant(part.get_content_type, FALLBACK_CONTENT_TYPE)
    return media_type if _MEDIA_TYPE.fullmatch(media_type) else FALLBACK_CONTENT_TYPE


# -- headers --------------------------------------------------------------------


def _text_field(
    message: EmailMessage, name: str, field: str, cut: list[str], *, limit: int = MAX_HEADER_TEXT
) -> str | None:
    """The first `name` header's text, decoded, within `limit` characters."""
    header = next(_parsed_headers(message, name, field, cut), None)
    if header is None:
        return None
    text = _tolerant(lambda: _clean(str(header)).strip(), "")
    if not text:
        return None
    if len(text) > limit:
        cut.append(field)
        return text[:limit]
    return text


def _address_field(message: EmailMessage, name: str, field: str, cut: list[str]) -> list[str]:
    """Each address of every `name` header as `Name <user@host>` (or `user@host`), names decoded.

    The values as sent when the parser gives up on them; at most `MAX_ADDRESSES`.
    """
    found: list[str] = []
    for header in _parsed_headers(message, name, field, cut):
        found.extend(_tolerant(partial(_header_addresses, header), [_unfold(_clean(str(header)))]))
        if len(found) > MAX_ADDRESSES:
            break  # the rest would be parsed only to be left out
    if len(found) > MAX_ADDRESSES:
        cut.append(field)
        return found[:MAX_ADDRESSES]
    return found


def _header_addresses(header: Any) -> list[str]:
    return [_clean(str(address)) for address in header.addresses if address.addr_spec not in ("", "<>")]


def _parsed_headers(message: EmailMessage, name: str, field: str, cut: list[str]) -> Iterator[Any]:
    """Each `name` header as the default policy reads it, as they are asked for, from at most
    `MAX_HEADER_CHARS` of their values in all.

    Parsing costs time in proportion to the value (a 0.8 MB Cc took 17 s, and
    a mail may repeat a header a hundred times), so what is past the bound is
    left unparsed and `field` joins `cut`.
    """
    wanted = name.lower()
    left = MAX_HEADER_CHARS
    for key, value in message.raw_items():
        if key.lower() != wanted:
            continue
        if left <= 0 or len(value) > left:
            value = value[: max(left, 0)]
            cut.append(field)
            if not value:
                return
        left -= len(value)
        yield _tolerant(partial(policy.default.header_fetch_parse, key, value), value)


def _raw_values(message: EmailMessage, name: str) -> list[str]:
    """A header's values as sent, for when they cannot be parsed."""
    wanted = name.lower()
    return [_unfold(_clean(str(value))) for key, value in message.raw_items() if key.lower() == wanted]


def _unfold(value: str) -> str:
    return re.sub(r"\r?\n[ \t]*", " ", value).strip()


def _date(message: EmailMessage) -> str | None:
    moment = getattr(message.get("Date"), "datetime", None)
    if moment is None:
        return None
    # RFC 5322 `-0000` means "UTC, origin unknown" and parses as naive.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso(moment.timestamp())


def _clean(text: str) -> str:
    """Valid Unicode: raw 8-bit header bytes are read as UTF-8 (RFC 6532)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _tolerant(read: Callable[[], T], fallback: T) -> T:
    """`read()`, or `fallback` when the message defeats the parser.

    The `email` package records most malformations as defects, but some
    hostile headers still raise from deep inside its header parser; one bad
    field must not cost the rest of the message.
    """
    try:
        return read()
    except Exception:
        return fallback
