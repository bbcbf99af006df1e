"""The SDK's answer types and the server's answer schemas describe one wire.

`cairn.client.models` types what the SDK hands through (typed dictionaries,
so the SDK needs no pydantic); `cairn.api.schemas` validates and documents
what the server sends. Each SDK type is checked against the schema of the
same answer, field by field, so neither can drift from the other.
"""

from __future__ import annotations

import inspect
import typing

import pytest
from pydantic import BaseModel

from cairn.api import schemas
from cairn.client import models

# Each SDK answer type, and the schemas whose fields it holds (a union's members together).
SCHEMAS_OF: dict[str, tuple[type[BaseModel], ...]] = {
    "EventRef": (schemas.EventRefOut,),
    "Delivery": (schemas.DeliveryResponse,),
    "Event": (schemas.EventOut,),
    "Page": (schemas.FeedResponse,),
    "AckedEvent": (schemas.AckedEventOut,),
    "Ack": (schemas.AckResponse,),
    "StateValue": (schemas.StateValueOut,),
    "StateDeletion": (schemas.DeletedStateOut,),
    "StateKey": (schemas.StateKeyOut,),
    "StateUsage": (schemas.StateUsageOut,),
    "StateListing": (schemas.StateListResponse,),
    "StateOperation": (schemas.StateOperationIn,),
    "StateResult": (schemas.StateSetResult, schemas.StateDeleteResult),
    "StateBatch": (schemas.StateBatchResponse,),
    "Contact": (schemas.ContactOut,),
    "ContactListing": (schemas.ContactsResponse,),
    "ContactChange": (schemas.ContactResponse,),
    "SendReceipt": (schemas.SendResponse,),
}
# SDK types of no server answer: what the SDK itself makes.
SDK_ONLY = {"Download": "a file the SDK saved from a download, not a JSON answer"}


def sdk_types() -> list[str]:
    return sorted(
        name
        for name, kind in vars(models).items()
        if inspect.isclass(kind) and typing.is_typeddict(kind) and kind.__module__ == models.__name__
    )


def test_every_sdk_answer_type_is_paired_with_its_server_schema():
    assert sorted([*SCHEMAS_OF, *SDK_ONLY]) == sdk_types()


@pytest.mark.parametrize("name", sorted(SCHEMAS_OF))
def test_the_sdk_type_has_exactly_the_fields_the_server_sends(name: str):
    sdk = typing.get_type_hints(getattr(models, name))
    members = [
        {field.alias or field_name: field.is_required() for field_name, field in schema.model_fields.items()}
        for schema in SCHEMAS_OF[name]
    ]
    # A union's field is sure to come only when every member requires it.
    server = {field: all(member.get(field, False) for member in members) for member in members for field in member}
    assert set(sdk) == set(server)
    # A field every answer carries is one the SDK type promises (optional ones may be marked either way).
    assert {field for field, required in server.items() if required} <= promised(getattr(models, name))


def promised(kind: type) -> set[str]:
    """The keys a typed dictionary promises, read from its annotations (`__required_keys__` misses
    `Required[...]` in a module whose annotations are strings)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    marked = {field: typing.get_origin(hint) for field, hint in hints.items()}
    if getattr(kind, "__total__", True):
        return {field for field, origin in marked.items() if origin is not typing.NotRequired}
    return {field for field, origin in marked.items() if origin is typing.Required}
