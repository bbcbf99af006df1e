"""The API's answers as typed dictionaries.

The SDK hands the server's JSON through unchanged, fields a newer server adds
included; these types only tell editors and checkers what to expect. The MCP
tools answer with the same shapes.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict


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
    type: str
    source: str
    ingress_surface: str
    data: Any
    data_encoding: NotRequired[Literal["json_text"]]
    created_at: str
    acknowledged_at: str | None
    content_type: str | None
    headers: dict[str, str] | None
    verified_by: str | None


class Page(TypedDict):
    events: list[Event]
    next_cursor: int
    has_more: bool
    # The owner trimmed every event up to this sequence; 0 when none was.
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


class StateOperation(TypedDict, total=False):
    """One operation of `State.transaction`; `if_revision` as for `State.set`."""

    key: Required[str]
    op: Required[Literal["set", "delete"]]
    value: Any
    if_revision: int


class StateResult(TypedDict, total=False):
    key: Required[str]
    op: Required[Literal["set", "delete"]]
    revision: Required[int]
    value: Any


class StateBatch(TypedDict):
    results: list[StateResult]
    usage: StateUsage


class Download(TypedDict):
    path: str
    size: int
    content_type: str


class Contact(TypedDict):
    email: str
    status: Literal["pending", "verified"]
    created_at: str
    verified_at: str | None


class ContactListing(TypedDict):
    contacts: list[Contact]
    outbound_configured: bool


class ContactChange(TypedDict):
    """A contact after a request; `code_sent` says whether a code was mailed by it."""

    contact: Contact
    code_sent: bool
    email: str
    status: Literal["pending", "verified"]


class SendReceipt(TypedDict):
    """`accepted`: the carrier took the message; the feed reports its outcome later."""

    status: Literal["accepted", "failed"]
    message_id: str
    event: EventRef
    duplicate: bool
