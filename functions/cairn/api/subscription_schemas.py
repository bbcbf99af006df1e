"""Wire shapes of the subscription routes (wake-ups), used for validation and OpenAPI."""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from cairn.addresses.inbox_bodies import MAX_LABEL_LENGTH
from cairn.api.schemas import Schema


class _Target(Schema):
    model_config = ConfigDict(extra="forbid")


class WebhookTargetIn(_Target):
    kind: Literal["webhook"]
    url: str = Field(max_length=2048, description="https URL (http://127.0.0.1 and localhost under cairn serve).")


class SqsTargetIn(_Target):
    kind: Literal["sqs"]
    queue_url: str = Field(max_length=2048)


class EventBridgeTargetIn(_Target):
    kind: Literal["eventbridge"]
    event_bus_arn: str = Field(max_length=1600)
    detail_type: str | None = Field(default=None, min_length=1, max_length=128, description="Default: event type.")


class LambdaTargetIn(_Target):
    kind: Literal["lambda"]
    function_arn: str = Field(max_length=256, description="Invoked asynchronously with the delivery.")


class StepFunctionsTargetIn(_Target):
    kind: Literal["step_functions"]
    task_token: str = Field(
        max_length=1024,
        description="One-shot: the first matching event completes the task, then the subscription ends.",
    )


class LambdaDurableCallbackTargetIn(_Target):
    kind: Literal["lambda_durable_callback"]
    callback_id: str = Field(
        max_length=1024,
        description="A Lambda durable execution's callback id (`create_callback` / `wait_for_callback`). One-shot: "
        "the first matching event completes the callback with the delivery as its JSON result (without the "
        "event's data above 262,144 bytes), then the subscription ends.",
    )


TargetIn = Annotated[
    WebhookTargetIn
    | SqsTargetIn
    | EventBridgeTargetIn
    | LambdaTargetIn
    | StepFunctionsTargetIn
    | LambdaDurableCallbackTargetIn,
    Field(discriminator="kind"),
]
EventType = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]


class SubscriptionCreateRequest(Schema):
    model_config = ConfigDict(extra="forbid")

    target: TargetIn
    types: list[EventType] | None = Field(
        default=None, max_length=32, description="Event types to deliver; absent means every event."
    )
    description: str | None = Field(default=None, max_length=500)


class AttemptOut(Schema):
    at: str
    outcome: Literal["delivered", "failed", "ended"]
    sequence: int | None = Field(description="The event's sequence; null for a test delivery.")
    status_code: int | None
    error: str | None
    next_retry_at: str | None


class SubscriptionOut(Schema):
    id: str
    target: dict[str, str] = Field(
        description="The target; a Step Functions task token or a durable callback id is not shown again."
    )
    types: list[str]
    description: str | None
    status: Literal["active", "failed", "ended"]
    created_at: str
    delivered_through: int = Field(
        description="Sequence up to which events were delivered or skipped by `types`; at creation, the address's "
        "last sequence (earlier events are never delivered)."
    )
    failures: int = Field(description="Consecutive failed attempts of the pending delivery.")
    next_retry_at: str | None
    attempts: list[AttemptOut] = Field(description="Recent delivery attempts, newest first.")


class SubscriptionResponse(Schema):
    subscription: SubscriptionOut


class SubscriptionCreatedResponse(Schema):
    subscription: SubscriptionOut
    secret: str | None = Field(
        description="A webhook's signing secret (Standard Webhooks `whsec_...`); shown this once, null for AWS targets."
    )


class SubscriptionListResponse(Schema):
    subscriptions: list[SubscriptionOut]


class SubscriptionDeletedResponse(Schema):
    subscription_id: str
    deleted: bool


class SubscriptionTestResponse(Schema):
    attempt: AttemptOut
