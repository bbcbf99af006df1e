"""Outbound email: contacts verified by a mailed code, and plain-text sends to them."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.api import presenters
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.schemas import (
    ContactRequest,
    ContactResponse,
    ContactsResponse,
    RemovedContactResponse,
    SendRequest,
    SendResponse,
)
from cairn.services import Services

CONTACTS_PATH = "/api/v1/addresses/<address_id>/email/contacts"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.contacts` and `services.sending` are built on first use: read them per request.

    @app.get(
        CONTACTS_PATH,
        summary="List the address's mail contacts",
        description="`outbound_configured` says whether this server can send mail at all.",
        tags=["email"],
        security=BEARER,
    )
    def list_contacts(address_id: str) -> ContactsResponse:
        found = services.contacts.list(address_id, bearer_token(app.current_event))
        return presenters.contacts(found, configured=services.contacts.configured)

    @app.post(
        CONTACTS_PATH,
        summary="Ask a contact for a code, or confirm it with the code",
        description="`{email}` mails a six-digit code from the address's own email (202, pending); asking again "
        "replaces the code, at most once a minute. `{email, code}` verifies the contact (200). The code is never "
        "returned, expires, and allows a few tries: `wrong_code`, `code_expired`, `too_many_attempts`. At most a "
        "few contacts per address (`contact_limit_reached`). Codes and tries per address and per recipient per UTC "
        "day are limited, also across removing the contact (429 `rate_limited`; a refused request stores nothing). "
        "A code the recipient's mail system refuses for good is 422 `mail_refused`.",
        tags=["email"],
        security=BEARER,
        status_code=202,
        responses={
            200: {
                "description": "The contact is verified.",
                "content": {"application/json": {"model": ContactResponse}},
            },
            202: {
                "description": "A code was mailed; the contact is pending.",
                "content": {"application/json": {"model": ContactResponse}},
            },
        },
    )
    def add_contact(address_id: str, body: Annotated[ContactRequest, Body()]) -> Response[ContactResponse]:
        token = bearer_token(app.current_event)
        if body.code is None:
            change = services.contacts.request_code(address_id, token, body.email)
        else:
            change = services.contacts.verification(address_id, token, body.email, body.code)
        return Response(
            status_code=202 if change.code_sent else 200,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.contact_change(change),
        )

    @app.delete(
        CONTACTS_PATH + "/<email>",
        summary="Remove a contact",
        description="A removed contact must be verified again before it can be mailed.",
        tags=["email"],
        security=BEARER,
    )
    def remove_contact(address_id: str, email: str) -> RemovedContactResponse:
        services.contacts.remove(address_id, bearer_token(app.current_event), email)
        return RemovedContactResponse(email=email.strip().lower(), removed=True)

    @app.post(
        "/api/v1/addresses/<address_id>/email/send",
        summary="Send plain text to one verified contact",
        description="Requires an `Idempotency-Key` header: the same key and body again answer the original (200, "
        "nothing sent, except that within a day a send the carrier refused is handed over again); another body "
        "under the key is 422 `idempotency_key_reused`. From is the address's own email (or the operator's "
        "sender with Reply-To the address's email), so replies arrive in its feed. Each send appends "
        "`email.sent` and holds one more feed slot for "
        "its outcome (`email.delivered`, `email.bounced`, `email.complained`, `email.failed`, or "
        "`email.outcome_unknown` when the carrier reported nothing by the deadline); a full feed "
        "refuses with `quota_exceeded`. Sends per address per UTC day are limited (429 `rate_limited`).",
        tags=["email"],
        security=BEARER,
        status_code=202,
        responses={
            200: {
                "description": "This key was used with this message already: the original send.",
                "content": {"application/json": {"model": SendResponse}},
            },
            202: {
                "description": "The message was handed to the carrier.",
                "content": {"application/json": {"model": SendResponse}},
            },
        },
    )
    def send(address_id: str, body: Annotated[SendRequest, Body()]) -> Response[SendResponse]:
        event = app.current_event
        result = services.sending.send(
            address_id, bearer_token(event), event.headers.get("idempotency-key"), body.model_dump(exclude_unset=True)
        )
        return Response(
            status_code=200 if result.duplicate else 202,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.sent(result),
        )
