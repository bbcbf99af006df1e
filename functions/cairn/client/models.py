# Generated from cairn.api.schemas by cairn/api/wire_types.py: do not edit.
# Regenerate with `python -m cairn.api.wire_types`.
"""The API's answers as typed dictionaries.

The SDK hands the server's JSON through unchanged, fields a newer server adds
included; these types only tell editors and checkers what to expect. The MCP
tools answer with the same shapes.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class EventRef(TypedDict):
    id: str
    sequence: int


class Delivery(TypedDict):
    """An inbox post: the event it made, or with `duplicate` the one an earlier post made."""

    duplicate: bool
    event: EventRef


class Event(TypedDict):
    """`ingress_surface` is the server's word on where it came from (`http`, `state`, or mail's name).

    Inbox posts also carry `content_type` (how the body was read), `headers`
    (the ones the address keeps) and `verified_by` (the verifier whose
    signature check the post passed); other events carry them as null.
    `data_encoding` is `json_text` only on an event stored nested deeper than
    the server's limit (128 levels) before it refused such input: `data` is
    then the JSON text of its data.
    """

    id: str
    sequence: int
    # The poster's label for inbox posts; Cairn's for mail and state changes.
    type: str
    # The poster's label for inbox posts: proves nothing about origin.
    source: str
    # Where the event entered Cairn, set by the server alone: `http` for an inbox post (anyone holding the inbox URL),
    # `state` for a state change made with the read token, and the deployment's mail surface (`email` unless configured,
    # e.g. `resend`) for received mail.
    ingress_surface: str
    data: Any
    # Present only as `json_text`, for a value nested deeper than 128 levels (accepted before Cairn refused such input):
    # `data` is then that value's JSON text, to decode with a parser that allows the depth.
    data_encoding: NotRequired[Literal["json_text"]]
    created_at: str
    acknowledged_at: str | None
    # Inbox posts: the type the body was read as (`application/json`, `application/x-www-form-urlencoded`, `text/...`,
    # or the declared type of bytes kept as base64).
    content_type: str | None
    # Inbox posts: the request headers the address keeps (`inbox.keep_headers`).
    headers: dict[str, str] | None
    # Inbox posts: the verifier (`github`, `stripe`, `slack`, `standard_webhooks`) whose signature check this delivery
    # passed, set by Cairn alone.
    verified_by: str | None


class Page(TypedDict):
    events: list[Event]
    # Pass as `after` to continue; when the page is empty, `after` (or `trimmed_through` if higher).
    next_cursor: int
    has_more: bool
    # The owner trimmed every event up to this sequence (0: none). A reader whose `after` was lower did not get them:
    # they are gone, not skipped by mistake.
    trimmed_through: int


class AckedEvent(TypedDict):
    id: str
    sequence: int
    acknowledged_at: str


class Ack(TypedDict):
    event: AckedEvent


class StateValue(TypedDict):
    """`value_encoding` is `json_text` only on a value stored nested too deeply, as on an event."""

    key: str
    value: Any
    # Present only as `json_text`, for a value nested deeper than 128 levels (accepted before Cairn refused such input):
    # `value` is then that value's JSON text, to decode with a parser that allows the depth.
    value_encoding: NotRequired[Literal["json_text"]]
    revision: int
    updated_at: str


class StateDeletion(TypedDict):
    key: str
    deleted: bool
    revision: int


class StateKey(TypedDict):
    key: str
    revision: int
    # Bytes this key counts against max_bytes.
    size: int
    updated_at: str


class StateUsage(TypedDict):
    keys: int
    bytes: int
    max_keys: int
    max_bytes: int


class StateListing(TypedDict):
    keys: list[StateKey]
    usage: StateUsage


class StateOperation(TypedDict):
    """One operation of a state transaction (`State.transaction` in the SDK); `if_revision` as for `State.set`."""

    key: str
    op: Literal["set", "delete"]
    value: NotRequired[Any]
    if_revision: NotRequired[int | None]


class StateResult(TypedDict):
    key: str
    op: Literal["set", "delete"]
    revision: int
    value: NotRequired[Any]


class StateBatch(TypedDict):
    results: list[StateResult]
    usage: StateUsage


class Contact(TypedDict):
    email: str
    status: Literal["pending", "verified"]
    created_at: str
    verified_at: str | None


class ContactListing(TypedDict):
    contacts: list[Contact]
    # Whether this server can send mail at all.
    outbound_configured: bool


class ContactChange(TypedDict):
    """A contact after a request; `code_sent` says whether a code was mailed by it."""

    contact: Contact
    # Whether a new code was mailed by this request.
    code_sent: bool
    email: str
    status: Literal["pending", "verified"]


class SendReceipt(TypedDict):
    """`accepted`: the carrier took the message; the feed reports its outcome later."""

    # `accepted`: the carrier took the message (not yet delivered); `failed`: it refused at once.
    status: Literal["accepted", "failed"]
    # The message's Message-ID header; outcome events carry it.
    message_id: str
    # The `email.sent` event.
    event: EventRef
    duplicate: bool


class FileWritten(TypedDict):
    key: str
    size: int


class FileListing(TypedDict):
    # Ascending, as their UTF-8 bytes sort (as Python sorts text).
    keys: list[str]
    # Set when more may follow: send it back as `after`.
    next: str | None


# Written by hand in cairn/api/wire_types.py (HAND_WRITTEN): no server answer has this shape.
class Download(TypedDict):
    """A file the SDK saved from a download, not a JSON answer."""

    path: str
    size: int
    content_type: str
