"""Agent sessions of an address (read token): what `CairnSession` calls.

A session's id is in the path; its items are JSON objects kept in the order
they were added.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from cairn.agent_sessions import conversations
from cairn.agent_sessions.ports import AddPart
from cairn.api.agent_session_schemas import (
    CLIENT_ID_PATTERN,
    ClearedResponse,
    ItemsAddedResponse,
    ItemsAddRequest,
    ItemsReplacedResponse,
    ItemsReplaceRequest,
    ItemsResponse,
    PoppedResponse,
)
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.services import Services

ITEMS = "/api/v1/addresses/<address_id>/sessions/<session_id>/items"
TAGS = ["sessions"]


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.agent_sessions` is built on first use: read it per request.

    def token() -> str | None:
        return bearer_token(app.current_event)

    @app.post(
        ITEMS,
        summary="Add items to a session, in order",
        description="All the items commit together, after every item added before, or none does; concurrent "
        "adds from other processes are never lost. The first add creates the session. An add sent again under "
        "its `add_id` after it committed adds nothing; other items under a used `add_id` are refused (422 "
        "`idempotency_key_reused`). An add larger than one request holds goes in parts under one `add_id` "
        "(`offset`, `more`): no reader sees any part before the last commits them all; meanwhile the session's "
        "other changes too large for one commit wait (409 `session_conflict`, reason `held`), and a part whose "
        "earlier parts were let go, their sender silent past the hold, is refused (409, reason `parts_lost`).",
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def add(address_id: str, session_id: str, body: Annotated[ItemsAddRequest, Body()]) -> Response[ItemsAddedResponse]:
        part = AddPart(body.offset, body.more)
        count = services.agent_sessions.add(address_id, token(), session_id, body.items, add_id=body.add_id, part=part)
        answer = ItemsAddedResponse(session_id=session_id, added=len(body.items), count=count)
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.get(
        ITEMS,
        summary="The newest items of a session, oldest first",
        description=f"`limit` newest items (at most {conversations.MAX_PAGE_ITEMS} and as many as fit one answer), "
        "below the sequence `before` when given; `next` resumes with older ones. An unknown session has none.",
        tags=TAGS,
        security=BEARER,
    )
    def items(
        address_id: str,
        session_id: str,
        limit: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
        before: Annotated[int | None, Query(ge=1, le=conversations.MAX_SEQUENCE)] = None,
    ) -> ItemsResponse:
        page = services.agent_sessions.items(address_id, token(), session_id, limit=limit, before=before)
        return ItemsResponse(session_id=session_id, items=page.items, next=page.next, version=page.version)

    @app.post(
        f"{ITEMS}/replace",
        summary="Replace a session's newest items, or all of them, at once",
        description="The new items take the place of the newest `newest` items (every item when absent): a reader "
        "sees the session before or after, never between, and a process that stops midway leaves one or the "
        "other. With `version` (a read's), only while nothing changed since that read (409 `session_conflict` "
        "otherwise): this is how a conversation is compacted without losing what another process added "
        "meanwhile. A replacement sent again under its `replace_id` after it committed changes nothing.",
        tags=TAGS,
        security=BEARER,
    )
    def replace(
        address_id: str, session_id: str, body: Annotated[ItemsReplaceRequest, Body()]
    ) -> ItemsReplacedResponse:
        replaced = services.agent_sessions.replace(
            address_id,
            token(),
            session_id,
            body.items,
            newest=body.newest,
            version=body.version,
            replace_id=body.replace_id,
        )
        return ItemsReplacedResponse(session_id=session_id, count=replaced.count, version=replaced.version)

    @app.post(
        f"{ITEMS}/pop",
        summary="Remove and return a session's newest item",
        description="Atomic across processes: of two pops at once, each gets a different item (or null once the "
        "session is empty). With `pop_id`, a pop sent again after it committed takes nothing more and answers "
        "the item it took (for a day).",
        tags=TAGS,
        security=BEARER,
    )
    def pop(
        address_id: str,
        session_id: str,
        pop_id: Annotated[
            str | None,
            Query(pattern=CLIENT_ID_PATTERN, description="A random id for this pop, the same on each retry of it."),
        ] = None,
    ) -> PoppedResponse:
        item = services.agent_sessions.pop(address_id, token(), session_id, pop_id=pop_id)
        return PoppedResponse(session_id=session_id, item=item)

    @app.delete(ITEMS, summary="Clear a session: remove every item", tags=TAGS, security=BEARER)
    def clear(address_id: str, session_id: str) -> ClearedResponse:
        services.agent_sessions.clear(address_id, token(), session_id)
        return ClearedResponse(session_id=session_id, cleared=True)
