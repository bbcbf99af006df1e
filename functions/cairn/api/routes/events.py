"""The event feed: long-poll, acknowledge and trim."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import AllowInfNan

from cairn.api import presenters
from cairn.api.requests import bearer_token, client_network
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.schemas import AckResponse, FeedResponse, TrimResponse
from cairn.api.sse import event_stream
from cairn.services import Services

MAX_CURSOR = 10**12 - 1


def register(app: ConcurrentRestResolver, services: Services) -> None:
    feed = services.feed
    settings = services.settings

    @app.get(
        "/api/v1/addresses/<address_id>/events",
        summary="Read events after a cursor, waiting up to `wait` seconds for the first one",
        description="Events stay until they expire; reading or acknowledging removes nothing. "
        "A long-poll counts once against the per-address poll rate. "
        "With `Accept: text/event-stream` the answer is a stream of server-sent events instead: each event as "
        "it commits (`id:` its sequence, `event:` its type, `data:` the event as in a page), starting after "
        "`Last-Event-ID` or `after`, a `: heartbeat` comment while idle, ending after a configured time; "
        "a stream counts once against the poll rate.",
        tags=["events"],
        security=BEARER,
        middlewares=[event_stream(feed, max_cursor=MAX_CURSOR)],
    )
    def poll(
        address_id: str,
        after: Annotated[int, Query(ge=0, le=MAX_CURSOR, description="Last sequence already handled.")] = 0,
        wait: Annotated[
            float, AllowInfNan(False), Query(ge=0, le=settings.max_wait_seconds, description="Seconds to wait.")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=settings.max_page_limit)] = settings.default_page_limit,
    ) -> FeedResponse:
        request = app.current_event
        client = client_network(request)
        page = feed.poll(address_id, bearer_token(request), after=after, wait=wait, limit=limit, client=client)
        return presenters.feed(page, after)

    @app.post(
        "/api/v1/addresses/<address_id>/events/<event_id>/ack",
        summary="Acknowledge an event",
        description="Marks the event handled and keeps the first acknowledgement time; repeating it is safe. "
        "The event stays in the feed until it expires.",
        tags=["events"],
        security=BEARER,
    )
    def acknowledge(address_id: str, event_id: str) -> AckResponse:
        return presenters.acknowledged(feed.acknowledge(address_id, bearer_token(app.current_event), event_id))

    @app.delete(
        "/api/v1/addresses/<address_id>/events",
        summary="Trim the oldest events, freeing their slots",
        description="Removes acknowledged events up to `through`, stopping before the first one not yet "
        "acknowledged, or every event up to `through` with `include_unacknowledged=true`. Sequences are never "
        "reused or renumbered: polls report `trimmed_through`. Repeating a trim is safe.",
        tags=["events"],
        security=BEARER,
    )
    def trim(
        address_id: str,
        through: Annotated[int, Query(ge=0, le=MAX_CURSOR, description="Last sequence to remove.")],
        include_unacknowledged: Annotated[bool, Query(description="Remove events not yet acknowledged too.")] = False,
    ) -> TrimResponse:
        result = feed.trim(
            address_id,
            bearer_token(app.current_event),
            through=through,
            include_unacknowledged=include_unacknowledged,
        )
        return presenters.trimmed(result)
