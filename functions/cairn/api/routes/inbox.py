"""The inbox URL: anyone holding it may post one JSON event."""

from aws_lambda_powertools.event_handler import Response, content_types

from cairn.api import presenters
from cairn.api.requests import raw_body
from cairn.api.schemas import DeliveryResponse
from cairn.services import Services


def register(app, services: Services) -> None:
    inbox = services.inbox

    @app.post(
        "/api/v1/inbox/<address_id>/<secret>",
        summary="Deliver a callback to an address",
        description="Any JSON body up to the inbox limit. The event's type and source come from the body's "
        "`type` and `source` strings (default `message.received` / `http`), its data from `data` or the "
        "whole body. With an `Idempotency-Key`, a retry with the same body returns the original event "
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
    def deliver(address_id: str, secret: str) -> Response[DeliveryResponse]:
        event = app.current_event
        result = inbox.deliver(
            address_id,
            secret,
            raw_body(event),
            event.headers.get("idempotency-key"),
        )
        return Response(
            status_code=200 if result.duplicate else 202,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.delivery(result),
        )
