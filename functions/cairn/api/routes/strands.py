"""Strands sessions of an address (read token): what `cairn.integrations.strands`' repository calls.

A session holds agents and multi-agents (each a versioned JSON record) and
each agent its messages by index. Writes name the version their run read
and the run itself; a write from a run that no longer has the session to
itself is 409 `session_conflict` and changes nothing.
"""

import json
from collections.abc import Callable
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from cairn.agent_sessions import strands
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.strands_session_schemas import (
    MessagesResponse,
    MessageWriteRequest,
    RecordCreateRequest,
    RecordResponse,
    RecordUpdateRequest,
    ReleasedResponse,
    ReleaseRequest,
    SessionCreatedResponse,
    SessionCreateRequest,
    SessionResponse,
    WrittenResponse,
)
from cairn.services import Services

BASE = "/api/v1/addresses/<address_id>/strands/<session_id>"
AGENT = f"{BASE}/agents/<record_id>"
TAGS = ["strands"]
CONFLICT = "409 `session_conflict` (`reason`: `moved`, `held`) when another run wrote since, or holds the agent."
MAX_INDEX = 10**12 - 1


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.strands_sessions` is built on first use: read it per request.

    def token() -> str | None:
        return bearer_token(app.current_event)

    @app.put(
        BASE,
        summary="Create a Strands session",
        description="409 `session_conflict` (`reason` `exists`) when it exists already.",
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def create_session(
        address_id: str, session_id: str, body: Annotated[SessionCreateRequest, Body()]
    ) -> Response[SessionCreatedResponse]:
        services.strands_sessions.create_session(address_id, token(), session_id, body.session)
        answer = SessionCreatedResponse(session_id=session_id, created=True)
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.get(BASE, summary="Read a Strands session", tags=TAGS, security=BEARER)
    def read_session(address_id: str, session_id: str) -> SessionResponse:
        found = services.strands_sessions.session(address_id, token(), session_id)
        return SessionResponse(session_id=session_id, session=found)

    for kind in strands.KINDS:
        _register_records(app, services, kind, token)

    @app.post(
        f"{AGENT}/messages",
        summary="Add an agent's next message",
        description="The message's `message_id` must be the agent's next index (its message count). " + CONFLICT,
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def create_message(
        address_id: str, session_id: str, record_id: str, body: Annotated[MessageWriteRequest, Body()]
    ) -> Response[WrittenResponse]:
        sessions = services.strands_sessions
        claim = sessions.claim(body.if_version, body.writer, body.hold_seconds)
        version = sessions.create_message(address_id, token(), session_id, record_id, body.message, claim)
        answer = WrittenResponse(session_id=session_id, record_id=record_id, version=version)
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.get(
        f"{AGENT}/messages",
        summary="An agent's messages from an index on",
        description=f"At most `limit` (and {strands.MAX_PAGE_MESSAGES}, and what fits one answer) from `offset`, "
        "read as one range: the cost does not grow with the session. `next` goes on when more remain.",
        tags=TAGS,
        security=BEARER,
    )
    def list_messages(
        address_id: str,
        session_id: str,
        record_id: str,
        offset: Annotated[int, Query(ge=0, le=MAX_INDEX)] = 0,
        limit: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
    ) -> MessagesResponse:
        found, following = services.strands_sessions.messages(
            address_id, token(), session_id, record_id, offset=offset, limit=limit
        )
        return MessagesResponse(session_id=session_id, record_id=record_id, messages=found, next=following)

    @app.put(
        f"{AGENT}/messages/<message_id>",
        summary="Replace a stored message (a redaction)",
        description=CONFLICT,
        tags=TAGS,
        security=BEARER,
    )
    def update_message(
        address_id: str,
        session_id: str,
        record_id: str,
        message_id: Annotated[int, Path(ge=0, le=MAX_INDEX)],
        body: Annotated[MessageWriteRequest, Body()],
    ) -> WrittenResponse:
        sessions = services.strands_sessions
        claim = sessions.claim(body.if_version, body.writer, body.hold_seconds)
        version = sessions.update_message(address_id, token(), session_id, record_id, message_id, body.message, claim)
        return WrittenResponse(session_id=session_id, record_id=record_id, version=version)

    @app.post(
        f"{AGENT}/release",
        summary="End a run's hold on an agent",
        description="Other runs may write at once. `released` is false when this writer held nothing.",
        tags=TAGS,
        security=BEARER,
    )
    def release(
        address_id: str, session_id: str, record_id: str, body: Annotated[ReleaseRequest, Body()]
    ) -> ReleasedResponse:
        released = services.strands_sessions.release(address_id, token(), session_id, record_id, body.writer)
        return ReleasedResponse(session_id=session_id, record_id=record_id, released=released)


def _register_records(
    app: ConcurrentRestResolver, services: Services, kind: str, token: Callable[[], str | None]
) -> None:
    """Create, read and update of one kind of record: `agents` or `multi_agents`."""
    path = f"{BASE}/{kind}/<record_id>"
    noun = "an agent" if kind == "agents" else "a multi-agent"

    @app.post(
        path,
        summary=f"Create {noun} in a Strands session",
        description="At version 1. 409 `session_conflict` (`reason` `exists`) when it exists already.",
        tags=TAGS,
        security=BEARER,
        status_code=201,
        operation_id=f"create_{kind}",
    )
    def create(
        address_id: str, session_id: str, record_id: str, body: Annotated[RecordCreateRequest, Body()]
    ) -> Response[WrittenResponse]:
        services.strands_sessions.create_record(address_id, token(), session_id, kind, record_id, body.value)
        answer = WrittenResponse(session_id=session_id, record_id=record_id, version=1)
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.get(path, summary=f"Read {noun}", tags=TAGS, security=BEARER, operation_id=f"read_{kind}")
    def read(address_id: str, session_id: str, record_id: str) -> RecordResponse:
        found = services.strands_sessions.record(address_id, token(), session_id, kind, record_id)
        if found is None:
            return RecordResponse(session_id=session_id, record_id=record_id, value=None, version=0, messages=0)
        value = json.loads(found.text)
        return RecordResponse(
            session_id=session_id, record_id=record_id, value=value, version=found.version, messages=found.messages
        )

    @app.put(
        path,
        summary=f"Replace {noun}'s state",
        description=CONFLICT + " 404 `not_found` when there is none.",
        tags=TAGS,
        security=BEARER,
        operation_id=f"update_{kind}",
    )
    def update(
        address_id: str, session_id: str, record_id: str, body: Annotated[RecordUpdateRequest, Body()]
    ) -> WrittenResponse:
        sessions = services.strands_sessions
        claim = sessions.claim(body.if_version, body.writer, body.hold_seconds)
        version = sessions.update_record(address_id, token(), session_id, kind, record_id, body.value, claim)
        return WrittenResponse(session_id=session_id, record_id=record_id, version=version)
