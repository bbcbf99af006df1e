"""Read an inbox body the way its sender meant it, whatever it is.

Webhook senders post JSON, HTML-form fields (Slack slash commands, Twilio,
PayPal), plain text or arbitrary bytes, and label them carelessly (`curl -d`
calls JSON a form). The bytes decide first: a body that parses as JSON is
JSON, whatever its label, unless the label claims JSON and the body is not.
Otherwise the label decides: form fields, text, or bytes kept as base64.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from cairn import charsets, credentials, jsontext
from cairn.errors import InvalidJson, InvalidRequest

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MAX_LABEL_LENGTH = 256
# Longer declared types are cut: a type is a label, not a place to store data.
MAX_CONTENT_TYPE_LENGTH = 256
# Control characters other than tab, newline and carriage return, and halves of UTF-16 surrogate
# pairs (which some charsets decode to and no JSON answer can carry): text holding them is bytes.
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


class Labels(msgspec.Struct, frozen=True):
    """An event's `type` and `source` where the body cannot carry them (the inbox URL's query)."""

    type: str | None = None
    source: str | None = None


# A delivery whose URL names neither label.
NO_LABELS = Labels()


class InboxBody(msgspec.Struct, frozen=True):
    """A delivery's body as read: labels, data, the type it was read as, and what makes a retry the same.

    `body_json` is the canonical text of a JSON body (None for other kinds);
    `data_json` is the event's data, `content_type` the media type it was
    read as (`application/json`, a form, `text/...`, or the declared type of
    bytes).
    """

    type: str | None
    source: str | None
    data_json: str
    content_type: str
    request_digest: str


def read(raw: bytes, declared: str, labels: Labels = NO_LABELS) -> InboxBody:
    """The body of one delivery; `declared` is the request's whole `Content-Type` ("" when absent).

    Raises `invalid_json` only for a body labelled JSON (or not labelled) that is not JSON, and
    `invalid_request` for a label longer than `MAX_LABEL_LENGTH`.
    """
    header = _printable(declared)[:MAX_CONTENT_TYPE_LENGTH]
    media = header.partition(";")[0].strip().lower()
    labels = Labels(_label(labels.type, "type"), _label(labels.source, "source"))
    try:
        body = jsontext.parse(raw)
    except InvalidJson:
        if media in ("", JSON) or media.endswith("+json"):
            raise
        return _not_json(raw, header, media, labels)
    fields = body if isinstance(body, dict) else {}
    data = fields["data"] if "data" in fields else body
    data_json = jsontext.canonical(data)
    # When the body is the event's data, its canonical text is the event's: written out once.
    body_json = jsontext.canonical(body) if "data" in fields else data_json
    return InboxBody(
        type=_label(fields.get("type"), "type") or labels.type,
        source=_label(fields.get("source"), "source") or labels.source,
        data_json=data_json,
        content_type=JSON,
        request_digest=credentials.digest(body_json + _labels_suffix(labels)),
    )


def _not_json(raw: bytes, header: str, media: str, labels: Labels) -> InboxBody:
    data: Any
    charset = _charset(header)  # None: a charset not to decode a stranger's bytes in, so they stay bytes
    if charset and media == FORM and (fields := _form_fields(raw, charset)) is not None:
        data, content_type = fields, FORM
    elif charset and media.startswith("text/") and (text := _text(raw, charset)) is not None:
        data, content_type = text, media
    else:
        content_type = media
        data = {"base64": base64.b64encode(raw).decode("ascii"), "content_type": header}
    # The bytes and their type, not the data: `a=1&a=2` and `a=1&a=2&` are different requests.
    request = header.encode() + b"\n" + _labels_suffix(labels).encode() + b"\n" + raw
    return InboxBody(
        type=labels.type,
        source=labels.source,
        data_json=jsontext.canonical(data),
        content_type=content_type,
        request_digest=credentials.digest(request),
    )


def _form_fields(raw: bytes, charset: str) -> dict[str, str | list[str]] | None:
    """Form fields by name, a repeated name as a list in order; None when the body is not a form in `charset`."""
    try:
        pairs = parse_qsl(raw.decode(charset), keep_blank_values=True, encoding=charset, errors="strict")
    except (UnicodeDecodeError, LookupError, ValueError):
        return None
    fields: dict[str, str | list[str]] = {}
    for name, value in pairs:
        if _NOT_TEXT.search(name) or _NOT_TEXT.search(value):
            return None
        held = fields.get(name)
        if held is None:
            fields[name] = value
        elif isinstance(held, list):
            held.append(value)
        else:
            fields[name] = [held, value]
    return fields


def _text(raw: bytes, charset: str) -> str | None:
    """The body as text; None when it does not decode or holds control characters (then it is bytes)."""
    try:
        text = raw.decode(charset)
    except (ValueError, LookupError):  # UnicodeError: some codecs (idna, undefined) raise no UnicodeDecodeError
        return None
    return None if _NOT_TEXT.search(text) else text


def _charset(header: str) -> str | None:
    """The codec of the declared `charset` parameter, else UTF-8; None when it is one not to run (then bytes)."""
    for parameter in header.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return charsets.declared_codec(value.strip().strip('"'))
    return "utf-8"


def _labels_suffix(labels: Labels) -> str:
    """What the query's labels add to a request's identity; nothing when there are none."""
    if labels.type is None and labels.source is None:
        return ""
    return "\n" + jsontext.canonical({"source": labels.source, "type": labels.type})


def _label(value: Any, name: str) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if len(value) > MAX_LABEL_LENGTH:
        raise InvalidRequest(f"{name} must be at most {MAX_LABEL_LENGTH} characters.", field=name)
    return value


def _printable(value: str) -> str:
    return "".join(character for character in value if character.isprintable())
