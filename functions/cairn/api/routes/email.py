"""Inbound email: attachment downloads and replay of a stored message."""

import base64
from typing import Annotated, Any
from urllib.parse import quote

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from cairn.api import presenters
from cairn.api.held_body import HeldBody
from cairn.api.requests import bearer_token, client_network
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.schemas import DeliveryResponse, EmailReplayRequest
from cairn.services import Services

BINARY_RESPONSE: dict[int, OpenAPIResponse] = {
    200: {
        "description": "The attachment's bytes, with its content type and file name.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.attachments` and `services.email` are built on first use: read them per request.

    @app.get(
        "/api/v1/addresses/<address_id>/events/<event_id>/attachments/<attachment_id>",
        summary="Download an attachment of an email event",
        description="Read from the stored message on demand; counts as one poll against the per-address rate. "
        "Over the size limit: 413 payload_too_large. Once the message has expired: 410 attachment_unavailable.",
        tags=["email"],
        security=BEARER,
        responses=BINARY_RESPONSE,
        # An attachment's bytes have no schema; validating them would only copy up to 10 MB again.
        enable_validation=False,
    )
    def download(address_id: str, event_id: str, attachment_id: str) -> Response[Any]:
        if not getattr(app.lambda_context, "streams_responses", False):
            token = bearer_token(app.current_event)
            found = services.attachments.download(address_id, token, event_id, attachment_id)
            # Encoded here, not by Powertools, which would re-serialize a JSON-typed body.
            response = Response(
                status_code=200,
                content_type=found.content_type,
                body=base64.b64encode(found.data).decode(),
                headers=attachment_headers(found.filename),
            )
            response.base64_encoded = True
            return response
        # Sent piece by piece, a download to a slow reader holds the execution as a stream does, so it
        # counts among its client's held reads until it is sent.
        found, release = services.attachments.download_held(
            address_id,
            bearer_token(app.current_event),
            event_id,
            attachment_id,
            client=client_network(app.current_event),
        )
        body = HeldBody(found.data, release=release)
        return Response(
            status_code=200, content_type=found.content_type, body=body, headers=attachment_headers(found.filename)
        )

    @app.post(
        "/api/v1/addresses/<address_id>/email/replay",
        summary="Replay a stored email into the feed (recovery)",
        description="Ingests a stored message addressed to this address again. If its event already exists, "
        "the original is returned (200, duplicate true); otherwise the new one (201).",
        tags=["email"],
        security=BEARER,
        status_code=201,
        responses={
            200: {
                "description": "The message's event already exists: the original.",
                "content": {"application/json": {"model": DeliveryResponse}},
            },
            201: {
                "description": "The message was ingested again.",
                "content": {"application/json": {"model": DeliveryResponse}},
            },
        },
    )
    def replay(address_id: str, body: Annotated[EmailReplayRequest, Body()]) -> Response[DeliveryResponse]:
        result = services.email.replay(address_id, bearer_token(app.current_event), body.message_id)
        return Response(
            status_code=200 if result.duplicate else 201,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.delivery(result),
        )


def attachment_headers(filename: str) -> dict[str, str]:
    return {
        "Content-Disposition": content_disposition(filename),
        # Senders choose the type; a browser must not sniff one of its own.
        "X-Content-Type-Options": "nosniff",
    }


def content_disposition(filename: str) -> str:
    """`attachment` with an ASCII file name, plus the exact UTF-8 one when they differ (RFC 6266)."""
    plain = "".join(c if c.isascii() and c not in '"\\' else "_" for c in filename)
    header = f'attachment; filename="{plain}"'
    return header if plain == filename else f"{header}; filename*=UTF-8''{quote(filename, safe='')}"
