"""Provision, describe and delete addresses."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.api import presenters, urls
from cairn.api.requests import bearer_token, client_ip
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.schemas import AddressDetailResponse, DeleteResponse, ProvisionRequest, ProvisionResponse
from cairn.services import Services

# OpenAPI's security requirement of every route that takes the read token.
BEARER: list[dict[str, list[str]]] = [{"bearerAuth": []}]


def register(app: ConcurrentRestResolver, services: Services) -> None:
    provisioning = services.provisioning
    settings = services.settings

    @app.post(
        "/api/v1/addresses",
        summary="Provision an address (no account needed)",
        description="Creates an address with a state store, an event feed, an inbox URL and an email address. "
        "The read token in the answer is shown once only. With an `Idempotency-Key` (32 or more random "
        "characters), a retry of the same request answers the same address and credentials again, marked "
        "`Idempotent-Replayed: true`; the key cannot be used for another request. A key that is not random "
        "(few different characters, a pattern repeated) is refused with `idempotency_key_not_random`.",
        tags=["addresses"],
        status_code=201,
    )
    def provision(body: Annotated[ProvisionRequest | None, Body()] = None) -> Response[ProvisionResponse]:
        request = body or ProvisionRequest()
        event = app.current_event
        created = provisioning.provision(
            client_ip=client_ip(event),
            task_id=request.task_id,
            name=request.name,
            expires_in_seconds=request.expires_in_seconds,
            keep_headers=None if request.inbox is None else request.inbox.keep_headers,
            idempotency_key=event.headers.get("idempotency-key"),
        )
        base = urls.base_url(event, settings.public_base_url)
        return Response(
            status_code=201,
            content_type=content_types.APPLICATION_JSON,
            body=presenters.provisioned(created, base),
            headers={"Idempotent-Replayed": "true"} if created.replayed else None,
        )

    @app.get(
        "/api/v1/addresses/<address_id>",
        summary="Describe an address: metadata and feed depth",
        tags=["addresses"],
        security=BEARER,
    )
    def describe(address_id: str) -> AddressDetailResponse:
        described = provisioning.describe(address_id, bearer_token(app.current_event))
        base = urls.base_url(app.current_event, settings.public_base_url)
        return presenters.overview(described, base, settings)

    @app.delete(
        "/api/v1/addresses/<address_id>",
        summary="Delete an address with its state and feed",
        description="The id, its read token and its inbox URL stop working at once.",
        tags=["addresses"],
        security=BEARER,
    )
    def delete(address_id: str) -> DeleteResponse:
        provisioning.delete(address_id, bearer_token(app.current_event))
        return presenters.deleted_address(address_id)
