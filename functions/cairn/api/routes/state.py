"""Durable state: read, write with compare-and-set, delete, batch."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.addresses.state import StateOperation
from cairn.api import presenters
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.schemas import (
    DeletedStateOut,
    PutStateRequest,
    StateBatchRequest,
    StateBatchResponse,
    StateListResponse,
    StateValueOut,
)
from cairn.decimal_text import is_decimal
from cairn.errors import InvalidRequest
from cairn.services import Services

KEY_PATH = "/api/v1/addresses/<address_id>/state/<key>"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    state = services.state

    @app.get(
        "/api/v1/addresses/<address_id>/state",
        summary="List state keys with their revisions and the address's usage",
        tags=["state"],
        security=BEARER,
    )
    def list_keys(address_id: str) -> StateListResponse:
        entries, usage = state.list_keys(address_id, bearer_token(app.current_event))
        return presenters.state_listing(entries, usage, services.settings)

    @app.get(KEY_PATH, summary="Read one state key", tags=["state"], security=BEARER)
    def get_key(address_id: str, key: str) -> Response[StateValueOut]:
        entry = state.get(address_id, bearer_token(app.current_event), key)
        return json_response(200, presenters.state_value(entry), revision=entry.revision)

    @app.put(
        KEY_PATH,
        summary="Write one state key (compare-and-set with if_revision)",
        description="`if_revision` absent: unconditional; 0: create only; N: only if the key is at revision N. "
        "A mismatch is 409 `revision_conflict` with `current_revision` and changes nothing. Every write appends "
        "a `state.updated` event in the same transaction; a full feed blocks the write.",
        tags=["state"],
        security=BEARER,
        responses={
            200: {"description": "The key was updated.", "content": {"application/json": {"model": StateValueOut}}},
            201: {"description": "The key was created.", "content": {"application/json": {"model": StateValueOut}}},
        },
    )
    def put_key(address_id: str, key: str, body: Annotated[PutStateRequest, Body()]) -> Response[StateValueOut]:
        operation = StateOperation(key=key, op="set", value=body.value, if_revision=body.if_revision)
        (write,) = state.apply(address_id, bearer_token(app.current_event), [operation])
        status = 201 if write.created else 200
        return json_response(status, presenters.state_value(write), revision=write.revision)

    @app.delete(
        KEY_PATH,
        summary="Delete one state key (optionally only at revision If-Match)",
        tags=["state"],
        security=BEARER,
    )
    def delete_key(address_id: str, key: str) -> DeletedStateOut:
        expected = parse_if_match(app.current_event.headers.get("if-match"))
        operation = StateOperation(key=key, op="delete", if_revision=expected)
        (write,) = state.apply(address_id, bearer_token(app.current_event), [operation])
        return presenters.state_deletion(write)

    @app.post(
        "/api/v1/addresses/<address_id>/state",
        summary="Apply up to 32 set/delete operations atomically",
        description="All or nothing. One 409 `revision_conflict` lists every conflicting key in `conflicts`. "
        "Each operation appends its own `state.updated` event, in order, with consecutive sequences.",
        tags=["state"],
        security=BEARER,
    )
    def batch(address_id: str, body: Annotated[StateBatchRequest, Body()]) -> StateBatchResponse:
        operations = [
            StateOperation(key=op.key, op=op.op, value=op.value, if_revision=op.if_revision) for op in body.operations
        ]
        writes, usage = state.apply_with_usage(address_id, bearer_token(app.current_event), operations)
        return presenters.state_batch(writes, usage, services.settings)


def json_response(status: int, body: StateValueOut, *, revision: int) -> Response[StateValueOut]:
    """A key's answer, with its revision as the ETag a later `If-Match` names."""
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers={"ETag": f'"{revision}"'}
    )


def parse_if_match(header: str | None) -> int | None:
    """`If-Match: 3`, `"3"` or `W/"3"` → 3; absent → None."""
    if header is None:
        return None
    text = header.strip().removeprefix("W/").strip('"')
    if not is_decimal(text) or len(text) > 18:
        raise InvalidRequest("If-Match must be a revision number.", field="If-Match")
    return int(text)
