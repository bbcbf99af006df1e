"""The owner's inbox settings (read token): headers kept on each event, provider signature verifiers."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.addresses.inbox_settings import VerifierKind
from cairn.api import presenters
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.schemas import AddressPatchRequest, InboxSettingsResponse, VerifierIn
from cairn.errors import InvalidRequest
from cairn.services import Services

VERIFIER_PATH = "/api/v1/addresses/<address_id>/inbox/verifiers/<kind>"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    config = services.inbox_config

    @app.patch(
        "/api/v1/addresses/<address_id>",
        summary="Change an address's inbox settings (kept headers)",
        description="`inbox.keep_headers` replaces the list of request headers the inbox keeps on each event "
        "(up to 16; `Authorization`, `Proxy-Authorization` and `Cookie` are never kept). Takes effect for the "
        "next delivery.",
        tags=["addresses"],
        security=BEARER,
    )
    def patch(address_id: str, body: Annotated[AddressPatchRequest, Body()]) -> InboxSettingsResponse:
        token = bearer_token(app.current_event)
        return presenters.inbox_settings(config.set_keep_headers(address_id, token, body.inbox.keep_headers))

    @app.get(
        "/api/v1/addresses/<address_id>/inbox",
        summary="Read an address's inbox settings: kept headers and verifiers (never their secrets)",
        tags=["addresses"],
        security=BEARER,
    )
    def read(address_id: str) -> InboxSettingsResponse:
        return presenters.inbox_settings(config.read(address_id, bearer_token(app.current_event)))

    @app.put(
        VERIFIER_PATH,
        summary="Register (or replace) the inbox's provider signature verifier of one kind",
        description="Kinds: `github` (`X-Hub-Signature-256`), `stripe` (`Stripe-Signature`), `slack` "
        "(`X-Slack-Signature` and `X-Slack-Request-Timestamp`), `standard_webhooks` (`webhook-id`, "
        "`webhook-timestamp`, `webhook-signature`). With one or more set, a delivery must pass one of them: "
        "otherwise 401 `signature_invalid` and nothing is appended; a passing one's event carries `verified_by`. "
        "Signed timestamps further than the tolerance from Cairn's clock are refused. The secret is never returned.",
        tags=["addresses"],
        security=BEARER,
        responses={
            200: {
                "description": "The verifier of this kind was replaced.",
                "content": {"application/json": {"model": InboxSettingsResponse}},
            },
            201: {
                "description": "The verifier was registered.",
                "content": {"application/json": {"model": InboxSettingsResponse}},
            },
        },
    )
    def put_verifier(
        address_id: str, kind: VerifierKind, body: Annotated[VerifierIn, Body()]
    ) -> Response[InboxSettingsResponse]:
        if body.kind is not None and body.kind != kind:
            raise InvalidRequest("The body's kind differs from the path's.", field="kind")
        token = bearer_token(app.current_event)
        settings, created = config.put_verifier(address_id, token, kind, body.secret, body.tolerance_s)
        return Response(
            status_code=201 if created else 200,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.inbox_settings(settings),
        )

    @app.delete(
        VERIFIER_PATH,
        summary="Remove the inbox's verifier of one kind (nothing changes if there is none)",
        tags=["addresses"],
        security=BEARER,
    )
    def delete_verifier(address_id: str, kind: VerifierKind) -> InboxSettingsResponse:
        return presenters.inbox_settings(config.delete_verifier(address_id, bearer_token(app.current_event), kind))
