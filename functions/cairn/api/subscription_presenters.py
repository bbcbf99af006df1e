"""Answer models of the subscription routes, built from the wake-up domain objects."""

from __future__ import annotations

from cairn.api import subscription_schemas as schemas
from cairn.clock import iso
from cairn.wakeups.models import Attempt, Created, Subscription, TargetKind

# Parameters that are credentials: accepted once, never shown again.
_HIDDEN = {TargetKind.STEP_FUNCTIONS: {"task_token"}, TargetKind.LAMBDA_DURABLE_CALLBACK: {"callback_id"}}


def attempt(item: Attempt) -> schemas.AttemptOut:
    return schemas.AttemptOut(
        at=iso(item.at),
        outcome=item.outcome,  # type: ignore[arg-type]
        sequence=item.sequence,
        status_code=item.status_code,
        error=item.error,
        next_retry_at=None if item.next_retry_at is None else iso(item.next_retry_at),
    )


def subscription(item: Subscription) -> schemas.SubscriptionOut:
    hidden = _HIDDEN.get(item.target.kind, set())
    target = {"kind": item.target.kind.value} | {
        name: value for name, value in sorted(item.target.params.items()) if name not in hidden
    }
    return schemas.SubscriptionOut(
        id=item.id,
        target=target,
        types=list(item.types),
        description=item.description,
        status=item.status.value,
        created_at=iso(item.created_at),
        delivered_through=item.cursor,
        failures=item.failures,
        next_retry_at=None if item.retry_at is None else iso(item.retry_at),
        attempts=[attempt(entry) for entry in item.attempts],
    )


def created(result: Created) -> schemas.SubscriptionCreatedResponse:
    return schemas.SubscriptionCreatedResponse(subscription=subscription(result.subscription), secret=result.secret)


def listing(items: list[Subscription]) -> schemas.SubscriptionListResponse:
    return schemas.SubscriptionListResponse(subscriptions=[subscription(item) for item in items])
