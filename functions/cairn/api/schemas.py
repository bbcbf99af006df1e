"""Wire shapes of the address API, used for validation and OpenAPI."""

from typing import Annotated, Any, Final, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from cairn.addresses.inbox_settings import MAX_KEPT_HEADERS, MAX_SECRET_LENGTH, VerifierKind
from cairn.email.ports import MESSAGE_ID_PATTERN
from cairn.jsontext import MAX_DEPTH
from cairn.runtime.wire import TIME_IN_ANSWER_PATTERN

# How an answer marks a stored value it carries as its JSON text (see `jsontext.stored`).
JSON_TEXT: Final = "json_text"
TextEncoding = Literal["json_text"]
TEXT_ENCODING = (
    f"Present only as `json_text`, for a value nested deeper than {MAX_DEPTH} levels (accepted before Cairn "
    "refused such input): `{name}` is then that value's JSON text, to decode with a parser that allows the depth."
)


class Schema(BaseModel):
    """A wire shape whose validator is built on its first use, not at import.

    A new container then builds only the shapes of the requests it answers
    (the OpenAPI document builds the rest when asked for).
    """

    model_config = ConfigDict(defer_build=True)


class InboxSettingsIn(Schema):
    model_config = ConfigDict(extra="forbid")

    keep_headers: list[str] = Field(
        max_length=MAX_KEPT_HEADERS,
        description=f"Request headers (up to {MAX_KEPT_HEADERS} names, any case) the inbox keeps on each event, "
        "e.g. `X-GitHub-Event`; `Authorization`, `Proxy-Authorization` and `Cookie` are never kept. "
        "Replaces the list held.",
    )


class ProvisionRequest(Schema):
    inbox: InboxSettingsIn | None = Field(default=None, description="The inbox's settings from the start.")
    task_id: str | None = Field(default=None, max_length=256, description="Caller-defined task identifier.")
    name: str | None = Field(default=None, max_length=256, description="Human-readable purpose.")
    expires_in_seconds: int | None = Field(
        default=None, description="Lifetime of the address; absent means it never expires."
    )


class AddressOut(Schema):
    id: str
    task_id: str | None
    name: str | None
    email: str
    created_at: str
    expires_at: str | None
    expiresAt: str | None = Field(description="The same instant as expires_at, in AgentAddress casing.")


class CredentialsOut(Schema):
    read_token: str = Field(description="Bearer token for reading, acknowledging and state; shown once.")


class AddressEndpointsOut(Schema):
    events_url: str
    state_url: str
    address_url: str


class EndpointsOut(AddressEndpointsOut):
    inbox_url: str = Field(description="Write-only capability URL (POST JSON, form fields, text or bytes); shown once.")


class ProvisionResponse(Schema):
    address: AddressOut
    credentials: CredentialsOut
    endpoints: EndpointsOut


class EventRefOut(Schema):
    id: str
    sequence: int


class DeliveryResponse(Schema):
    """An inbox post: the event it made, or with `duplicate` the one an earlier post made."""

    duplicate: bool
    event: EventRefOut


class EmailReplayRequest(Schema):
    model_config = ConfigDict(extra="forbid")

    message_id: str = Field(
        validation_alias=AliasChoices("message_id", "email_id"),
        pattern=f"^{MESSAGE_ID_PATTERN.pattern}$",
        description="The `message_id` of the stored message (AgentAddress clients send it as `email_id`).",
    )


class EventOut(Schema):
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
    type: str = Field(description="The poster's label for inbox posts; Cairn's for mail and state changes.")
    source: str = Field(description="The poster's label for inbox posts: proves nothing about origin.")
    ingress_surface: str = Field(
        description="Where the event entered Cairn, set by the server alone: `http` for an inbox post (anyone "
        "holding the inbox URL), `state` for a state change made with the read token, and the deployment's mail "
        "surface (`email` unless configured, e.g. `resend`) for received mail."
    )
    data: Any
    data_encoding: TextEncoding | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description=TEXT_ENCODING.format(name="data"),
    )
    created_at: str
    acknowledged_at: str | None
    content_type: str | None = Field(
        default=None,
        description="Inbox posts: the type the body was read as (`application/json`, "
        "`application/x-www-form-urlencoded`, `text/...`, or the declared type of bytes kept as base64).",
    )
    headers: dict[str, str] | None = Field(
        default=None, description="Inbox posts: the request headers the address keeps (`inbox.keep_headers`)."
    )
    verified_by: str | None = Field(
        default=None,
        description="Inbox posts: the verifier (`github`, `stripe`, `slack`, `standard_webhooks`) whose signature "
        "check this delivery passed, set by Cairn alone.",
    )


class FeedResponse(Schema):
    events: list[EventOut]
    next_cursor: int = Field(
        description="Pass as `after` to continue; when the page is empty, `after` (or `trimmed_through` if higher)."
    )
    has_more: bool
    trimmed_through: int = Field(
        description="The owner trimmed every event up to this sequence (0: none). A reader whose `after` was "
        "lower did not get them: they are gone, not skipped by mistake."
    )


class TrimResponse(Schema):
    trimmed: int = Field(description="Live events this request removed.")
    trimmed_through: int = Field(description="Every event up to this sequence is now gone.")


class AckedEventOut(Schema):
    id: str
    sequence: int
    acknowledged_at: str


class AckResponse(Schema):
    event: AckedEventOut


class FeedCountsOut(Schema):
    events: int = Field(description="Retained events.")
    unacknowledged: int
    last_sequence: int
    max_events: int


class DeletedAddressOut(Schema):
    id: str


class DeleteResponse(Schema):
    address: DeletedAddressOut
    deleted: bool


class StateUsageOut(Schema):
    keys: int
    bytes: int
    max_keys: int
    max_bytes: int


class StateKeyOut(Schema):
    key: str
    revision: int
    size: int = Field(description="Bytes this key counts against max_bytes.")
    updated_at: str


class StateListResponse(Schema):
    keys: list[StateKeyOut]
    usage: StateUsageOut


class StateValueOut(Schema):
    """`value_encoding` is `json_text` only on a value stored nested too deeply, as on an event."""

    key: str
    value: Any
    value_encoding: TextEncoding | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description=TEXT_ENCODING.format(name="value"),
    )
    revision: int
    updated_at: str


class PutStateRequest(Schema):
    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="Any JSON value, null included.")
    # Strict: `true` or `"3"` would pass as a revision a client never meant.
    if_revision: int | None = Field(
        default=None,
        ge=0,
        strict=True,
        description="Absent: unconditional. 0: create only. N: only if the key is at revision N.",
    )


class DeletedStateOut(Schema):
    key: str
    deleted: bool
    revision: int


class StateOperationIn(Schema):
    """One operation of a state transaction (`State.transaction` in the SDK); `if_revision` as for `State.set`."""

    model_config = ConfigDict(extra="forbid")

    key: str
    op: Literal["set", "delete"]
    value: Any = None
    if_revision: int | None = Field(default=None, ge=0, strict=True)

    @model_validator(mode="after")
    def set_needs_a_value(self) -> "StateOperationIn":
        if self.op == "set" and "value" not in self.model_fields_set:
            raise ValueError("a set operation needs a value")
        return self


class StateBatchRequest(Schema):
    model_config = ConfigDict(extra="forbid")

    operations: list[StateOperationIn] = Field(min_length=1)


class StateSetResult(Schema):
    key: str
    op: Literal["set"]
    revision: int
    value: Any


class StateDeleteResult(Schema):
    key: str
    op: Literal["delete"]
    revision: int


class StateBatchResponse(Schema):
    results: list[Annotated[StateSetResult | StateDeleteResult, Field(discriminator="op")]]
    usage: StateUsageOut


class AddressDetailResponse(Schema):
    address: AddressOut
    feed: FeedCountsOut
    state: StateUsageOut
    endpoints: AddressEndpointsOut


class MemoryAppendResponse(Schema):
    model_config = ConfigDict(extra="forbid")

    agent_id: str
    run_id: str
    sequences: list[int] = Field(description="The sequences assigned, in the order of the events sent.")


class MemoryEventOut(Schema):
    model_config = ConfigDict(extra="forbid")

    sequence: int
    type: str
    timestamp: str = Field(pattern=TIME_IN_ANSWER_PATTERN, json_schema_extra={"format": "date-time"})
    data: dict[str, Any]
    labels: dict[str, str]


class MemorySnapshotResponse(Schema):
    model_config = ConfigDict(extra="forbid")

    agent_id: str
    run_id: str
    events: list[MemoryEventOut]
    next_cursor: int = Field(description="Pass as `after` to continue; equals `after` when the page is empty.")
    has_more: bool


class ContactOut(Schema):
    email: str
    status: Literal["pending", "verified"]
    created_at: str
    verified_at: str | None


class ContactsResponse(Schema):
    contacts: list[ContactOut]
    outbound_configured: bool = Field(description="Whether this server can send mail at all.")


class ContactRequest(Schema):
    email: str = Field(max_length=320, description="The contact's address; without `code`, a code is mailed to it.")
    code: str | None = Field(default=None, max_length=64, description="The six-digit code mailed to the contact.")


class ContactResponse(Schema):
    """A contact after a request; `code_sent` says whether a code was mailed by it."""

    contact: ContactOut
    code_sent: bool = Field(description="Whether a new code was mailed by this request.")
    # The AgentAddress client reads the contact's fields at the top level too.
    email: str
    status: Literal["pending", "verified"]


class RemovedContactResponse(Schema):
    email: str
    removed: bool


class SendRequest(Schema):
    # Other fields are read to refuse them with their own code (html, attachments, cc...).
    model_config = ConfigDict(extra="allow")

    to: str | list[str] = Field(description="One verified contact.")
    subject: str | None = Field(default=None, description="One line; defaults to `Re: ...` when replying.")
    text: str = Field(description="Plain text, at most `outbound_max_text_bytes` UTF-8 bytes.")
    reply_to_event_id: str | None = Field(
        default=None, description="A retained `email.received` event of this address to answer."
    )


class SendResponse(Schema):
    """`accepted`: the carrier took the message; the feed reports its outcome later."""

    status: Literal["accepted", "failed"] = Field(
        description="`accepted`: the carrier took the message (not yet delivered); `failed`: it refused at once."
    )
    message_id: str = Field(description="The message's Message-ID header; outcome events carry it.")
    event: EventRefOut = Field(description="The `email.sent` event.")
    duplicate: bool


class AddressPatchRequest(Schema):
    model_config = ConfigDict(extra="forbid")

    inbox: InboxSettingsIn


class VerifierIn(Schema):
    model_config = ConfigDict(extra="forbid")

    kind: VerifierKind | None = Field(default=None, description="If given, the kind in the path.")
    secret: str = Field(
        min_length=1,
        max_length=MAX_SECRET_LENGTH,
        validation_alias=AliasChoices("secret", "signing_secret"),
        description="The provider's signing secret (Slack's `signing_secret`; Standard Webhooks' `whsec_…`). "
        "Stored to check signatures and never returned.",
    )
    tolerance_s: int | None = Field(
        default=None,
        strict=True,
        description="stripe and slack: how far (seconds) a signed timestamp may be from Cairn's clock; default 300. "
        "standard_webhooks checks a fixed 300; github signs no time.",
    )


class VerifierOut(Schema):
    kind: str = Field(description="`github`, `stripe`, `slack` or `standard_webhooks`.")
    tolerance_s: int | None = Field(description="Seconds a signed timestamp may be from now; null for github.")
    created_at: str


class InboxSettingsOut(Schema):
    keep_headers: list[str] = Field(description="Kept request headers, lower-cased.")
    verifiers: list[VerifierOut] = Field(
        description="A delivery must pass one of these (else 401 `signature_invalid`); its event then carries "
        "`verified_by`. Secrets are never shown."
    )


class InboxSettingsResponse(Schema):
    inbox: InboxSettingsOut
