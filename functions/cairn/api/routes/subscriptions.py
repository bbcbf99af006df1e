"""Wake-up subscriptions of an address: where its new events are pushed (read token)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.api import subscription_presenters as presenters
from cairn.api import urls
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.subscription_schemas import (
    SubscriptionCreatedResponse,
    SubscriptionCreateRequest,
    SubscriptionDeletedResponse,
    SubscriptionListResponse,
    SubscriptionResponse,
    SubscriptionTestResponse,
)
from cairn.services import Services
from cairn.wakeups.models import Target, TargetKind
from cairn.wakeups.subscriptions import TESTS_PER_MINUTE

BASE = "/api/v1/addresses/<address_id>/subscriptions"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.subscriptions` is built on first use: read it per request.

    def token() -> str | None:
        return bearer_token(app.current_event)

    @app.post(
        BASE,
        summary="Subscribe a target to the address's new events",
        description="Events committed from now on are pushed to the target, in sequence order, at least once; "
        "a webhook is signed as Standard Webhooks with the `secret` in this answer, shown once. "
        "A webhook URL must not lead to private addresses or to this service itself (400 `target_refused`). "
        "At most 10 subscriptions per address (configuration). A one-shot target (a task token, a callback id) "
        "the address already has answers 200 with its subscription instead of making another.",
        tags=["subscriptions"],
        security=BEARER,
        status_code=201,
    )
    def create(
        address_id: str, body: Annotated[SubscriptionCreateRequest, Body()]
    ) -> Response[SubscriptionCreatedResponse]:
        params = body.target.model_dump(exclude={"kind"}, exclude_none=True)
        target = Target(TargetKind(body.target.kind), params)
        result = services.subscriptions.create(
            address_id,
            token(),
            target,
            types=body.types or (),
            description=body.description,
            origins=urls.request_origins(app.current_event, services.settings.region),
        )
        status = 200 if result.existing else 201
        return Response(
            status_code=status, content_type=content_types.APPLICATION_JSON, body=presenters.created(result)
        )

    @app.get(
        BASE,
        summary="List the address's subscriptions with their state and recent attempts",
        tags=["subscriptions"],
        security=BEARER,
    )
    def list_all(address_id: str) -> SubscriptionListResponse:
        return presenters.listing(services.subscriptions.list(address_id, token()))

    @app.get(f"{BASE}/<subscription_id>", summary="Read one subscription", tags=["subscriptions"], security=BEARER)
    def read(address_id: str, subscription_id: str) -> SubscriptionResponse:
        found = services.subscriptions.get(address_id, token(), subscription_id)
        return SubscriptionResponse(subscription=presenters.subscription(found))

    @app.delete(
        f"{BASE}/<subscription_id>",
        summary="Delete a subscription; nothing more is delivered to it",
        tags=["subscriptions"],
        security=BEARER,
    )
    def delete(address_id: str, subscription_id: str) -> SubscriptionDeletedResponse:
        services.subscriptions.delete(address_id, token(), subscription_id)
        return SubscriptionDeletedResponse(subscription_id=subscription_id, deleted=True)

    @app.post(
        f"{BASE}/<subscription_id>/test",
        summary="Send a `subscription.test` delivery now",
        description="The answer is the attempt (delivered or failed, status code or error), within the "
        "delivery deadline; the subscription's position in the feed does not move. At most "
        f"{TESTS_PER_MINUTE} a minute per address (429 `rate_limited`).",
        tags=["subscriptions"],
        security=BEARER,
    )
    def test(address_id: str, subscription_id: str) -> SubscriptionTestResponse:
        return SubscriptionTestResponse(
            attempt=presenters.attempt(services.subscriptions.test(address_id, token(), subscription_id))
        )

    @app.post(
        f"{BASE}/<subscription_id>/rotate",
        summary="Give a webhook subscription a new secret",
        description="The new secret is shown once; the previous one keeps signing for 24 hours, "
        "so deliveries carry both signatures until then. Any older secret is dropped now: at most two sign.",
        tags=["subscriptions"],
        security=BEARER,
    )
    def rotate(address_id: str, subscription_id: str) -> SubscriptionCreatedResponse:
        return presenters.created(services.subscriptions.rotate(address_id, token(), subscription_id))
