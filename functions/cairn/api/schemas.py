"""Wire shapes of the address API, used for validation and OpenAPI."""

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from cairn.email.ports import MESSAGE_ID_PATTERN
from cairn.runtime.wire import TIME_IN_ANSWER_PATTERN


class ProvisionRequest(BaseModel):
    task_id: str | None = Field(default=None, max_length=256, description="Caller-defined task identifier.")
    name: str | None = Field(default=None, max_length=256, description="Human-readable purpose.")
    expires_in_seconds: int | None = Field(
        default=None, description="Lifetime of the address; absent means it never expires."
    )


class AddressOut(BaseModel):
    id: str
    task_id: str | None
    name: str | None
    email: str
    created_at: str
    expires_at: str | None
    expiresAt: str | None = Field(description="The same instant as expires_at, in AgentAddress casing.")


class CredentialsOut(BaseModel):
    read_token: str = Field(description="Bearer token for reading, acknowledging and state; shown once.")


class AddressEndpointsOut(BaseModel):
    events_url: str
    state_url: str
    address_url: str


class EndpointsOut(AddressEndpointsOut):
    inbox_url: str = Field(description="Write-only capability URL (POST any JSON); shown once.")


class ProvisionResponse(BaseModel):
    address: AddressOut
    credentials: CredentialsOut
    endpoints: EndpointsOut


class EventRefOut(BaseModel):
    id: str
    sequence: int


class DeliveryResponse(BaseModel):
    duplicate: bool
    event: EventRefOut


class EmailReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message_id: str = Field(
        validation_alias=AliasChoices("message_id", "email_id"),
        pattern=f"^{MESSAGE_ID_PATTERN.pattern}$",
        description="The `message_id` of the stored message (AgentAddress clients send it as `email_id`).",
    )


class EventOut(BaseModel):
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
    created_at: str
    acknowledged_at: str | None


class FeedResponse(BaseModel):
    events: list[EventOut]
    next_cursor: int = Field(description="Pass as `after` to continue; equals `after` when the page is empty.")
    has_more: bool


class AckedEventOut(BaseModel):
    id: str
    sequence: int
    acknowledged_at: str


class AckResponse(BaseModel):
    event: AckedEventOut


class FeedCountsOut(BaseModel):
    events: int = Field(description="Retained events.")
    unacknowledged: int
    last_sequence: int
    max_events: int


class DeletedAddressOut(BaseModel):
    id: str


class DeleteResponse(BaseModel):
    address: DeletedAddressOut
    deleted: bool


class StateUsageOut(BaseModel):
    keys: int
    bytes: int
    max_keys: int
    max_bytes: int


class StateKeyOut(BaseModel):
    key: str
    revision: int
    size: int = Field(description="Bytes this key counts against max_bytes.")
    updated_at: str


class StateListResponse(BaseModel):
    keys: list[StateKeyOut]
    usage: StateUsageOut


class StateValueOut(BaseModel):
    key: str
    value: Any
    revision: int
    updated_at: str


class PutStateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="Any JSON value, null included.")
    if_revision: int | None = Field(
        default=None, ge=0, description="Absent: unconditional. 0: create only. N: only if the key is at revision N."
    )


class DeletedStateOut(BaseModel):
    key: str
    deleted: bool
    revision: int


class StateOperationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    op: Literal["set", "delete"]
    value: Any = None
    if_revision: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def set_needs_a_value(self) -> "StateOperationIn":
        if self.op == "set" and "value" not in self.model_fields_set:
            raise ValueError("a set operation needs a value")
        return self


class StateBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operations: list[StateOperationIn] = Field(min_length=1)


class StateSetResult(BaseModel):
    key: str
    op: Literal["set"]
    revision: int
    value: Any


class StateDeleteResult(BaseModel):
    key: str
    op: Literal["delete"]
    revision: int


class StateBatchResponse(BaseModel):
    results: list[Annotated[StateSetResult | StateDeleteResult, Field(discriminator="op")]]
    usage: StateUsageOut


class AddressDetailResponse(BaseModel):
    address: AddressOut
    feed: FeedCountsOut
    state: StateUsageOut
    endpoints: AddressEndpointsOut


class MemoryAppendResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str
    run_id: str
    sequences: list[int] = Field(description="The sequences assigned, in the order of the events sent.")


class MemoryEventOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sequence: int
    type: str
    timestamp: str = Field(pattern=TIME_IN_ANSWER_PATTERN, json_schema_extra={"format": "date-time"})
    data: dict[str, Any]
    labels: dict[str, str]


class MemorySnapshotResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str
    run_id: str
    events: list[MemoryEventOut]
    next_cursor: int = Field(description="Pass as `after` to continue; equals `after` when the page is empty.")
    has_more: bool
