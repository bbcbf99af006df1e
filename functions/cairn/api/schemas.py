"""Wire shapes of the address API, used for validation and OpenAPI."""

from typing import Any

from pydantic import BaseModel, Field


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


class EventOut(BaseModel):
    id: str
    sequence: int
    type: str
    source: str
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


class AddressDetailResponse(BaseModel):
    address: AddressOut
    feed: FeedCountsOut
    endpoints: AddressEndpointsOut


class DeletedAddressOut(BaseModel):
    id: str


class DeleteResponse(BaseModel):
    address: DeletedAddressOut
    deleted: bool
