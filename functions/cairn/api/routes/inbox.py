"""The inbox URL: anyone holding it may post one event (JSON, form fields, text or bytes)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query

from cairn.addresses.inbox import InboxRequest
from cairn.addresses.inbox_bodies import MAX_LABEL_LENGTH, Labels
from cairn.api import presenters
from cairn.api.requests import raw_body
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.schemas import DeliveryResponse
from cairn.services import Services


def register(app: ConcurrentRestResolver, services: Services) -> None:
    inbox = services.inbox

    @app.post(
        "/api/v1/inbox/<address_id>/<secret>",
        summary="Deliver a callback to an address",
        description="Any body up to the inbox limit. A body that parses as JSON is JSON, whatever its declared "
        "type: the event's type and source come from its `type` and `source` strings, its data from `data` or "
        "the whole body. Otherwise the `Content-Type` decides: `application/x-www-form-urlencoded` gives an "
        "object of the fields (a repeated name as a list), `text/*` the text, any other type "
        '`{"base64", "content_type"}`. The query\'s `type` and `source` label events whose body carries '
        "none (default `message.received` / `http`). The event records the `content_type` it was read as. "
        "With an `Idempotency-Key`, a retry with the same bytes and type returns the original event "
        "(200, duplicate true); a different body under the same key is refused (422).",
        tags=["inbox"],
        status_code=202,
        responses={
            200: {
                "description": "A retry under the same Idempotency-Key: the original event.",
                "content": {"application/json": {"model": DeliveryResponse}},
            },
            202: {
                "description": "The event was appended.",
                "content": {"application/json": {"model": DeliveryResponse}},
            },
        },
    )
    def deliver(
        address_id: str,
        secret: str,
        event_type: Annotated[
            str | None, Query(alias="type", max_length=MAX_LABEL_LENGTH, description="The type when the body has none.")
        ] = None,
        source: Annotated[
            str | None, Query(max_length=MAX_LABEL_LENGTH, description="The source when the body has none.")
        ] = None,
    ) -> Response[DeliveryResponse]:
        event = app.current_event
        request = InboxRequest(
            body=raw_body(event),
            content_type=event.headers.get("content-type", ""),
            labels=Labels(type=event_type, source=source),
            idempotency_key=event.headers.get("idempotency-key"),
            headers={name.lower(): value for name, value in event.headers.items()},
        )
        result = inbox.deliver(address_id, secret, request)
        return Response(
            status_code=200 if result.duplicate else 202,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.delivery(result),
        )
