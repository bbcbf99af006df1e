"""What a subscription is, independent of storage, HTTP and transports."""

from __future__ import annotations

import enum
from collections.abc import Mapping

import msgspec

from cairn.values import repr_without


class TargetKind(enum.StrEnum):
    WEBHOOK = "webhook"
    SQS = "sqs"
    EVENTBRIDGE = "eventbridge"
    LAMBDA = "lambda"
    STEP_FUNCTIONS = "step_functions"
    LAMBDA_DURABLE_CALLBACK = "lambda_durable_callback"


class SubscriptionStatus(enum.StrEnum):
    ACTIVE = "active"
    # Retries ran out; an event of the address says so.
    FAILED = "failed"
    # The target said it wants no more (410), or a one-shot target was used.
    ENDED = "ended"


# Targets that resume one waiting execution: the first matching event completes it, and then
# nothing is left to deliver to.
ONE_SHOT_KINDS = frozenset({TargetKind.STEP_FUNCTIONS, TargetKind.LAMBDA_DURABLE_CALLBACK})


class Target(msgspec.Struct, frozen=True):
    """Where deliveries go: a kind and its parameters (`url`, `queue_url`, ...)."""

    kind: TargetKind
    params: Mapping[str, str]

    @property
    def one_shot(self) -> bool:
        """A Step Functions task token or a durable function's callback id completes one wait, once."""
        return self.kind in ONE_SHOT_KINDS


# A webhook is signed by its current secret and, for a day after a rotation, the one it replaced.
MAX_SIGNING_SECRETS = 2


class SigningSecret(msgspec.Struct, frozen=True):
    """A webhook secret (`whsec_...`); a rotated-out one signs until `expires_at`."""

    secret: str
    expires_at: float | None = None

    def valid(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


class Attempt(msgspec.Struct, frozen=True):
    """One delivery attempt, as GET shows it."""

    at: float
    outcome: str  # delivered | failed | ended
    sequence: int | None
    status_code: int | None = None
    error: str | None = None
    next_retry_at: float | None = None


class Subscription(msgspec.Struct, frozen=True):
    """A subscription with its delivery position and retry state.

    `cursor` is the last sequence handled (delivered, or skipped by the
    type filter); `retry_at` is when a failing delivery may be tried again.
    `secrets` sign webhooks and are never shown after creation.
    `expires_at` is its address's: past it, nothing more is delivered.
    """

    id: str
    address_id: str
    target: Target
    types: tuple[str, ...]
    description: str | None
    created_at: float
    status: SubscriptionStatus = SubscriptionStatus.ACTIVE
    cursor: int = 0
    retry_at: float | None = None
    failing_since: float | None = None
    failures: int = 0
    attempts: tuple[Attempt, ...] = ()
    lease_until: float | None = None
    secrets: tuple[SigningSecret, ...] = ()
    expires_at: float | None = None

    def __repr__(self) -> str:
        return repr_without(self, "secrets")

    def wants(self, event_type: str) -> bool:
        return not self.types or event_type in self.types

    def signing_secrets(self, now: float) -> list[str]:
        """The current secret and, during a rotation's overlap, the previous one: never more, whatever is stored."""
        return [item.secret for item in self.secrets if item.valid(now)][:MAX_SIGNING_SECRETS]


class Created(msgspec.Struct, frozen=True):
    """A new subscription and, for a webhook, its secret: shown this once.

    `existing`: the address already had this one-shot target, and this is its subscription.
    """

    subscription: Subscription
    secret: str | None
    existing: bool = False


class Delivery(msgspec.Struct, frozen=True):
    """What a transport sends: `message_id` is the event id (receivers deduplicate by it)."""

    message_id: str
    event_type: str
    sequence: int | None
    body: str
    # The same delivery without the event's data, for targets whose messages are smaller.
    compact_body: str


class Outcome(msgspec.Struct, frozen=True):
    """What a target answered: delivered, gone (ends the subscription), or a failure.

    A failure is retried, unless `permanent`: the target can never take this
    delivery (a durable callback that no longer waits), so the subscription
    fails at once with the error as its reason.
    """

    delivered: bool
    gone: bool = False
    permanent: bool = False
    status_code: int | None = None
    error: str | None = None


class EventNotice(msgspec.Struct, frozen=True):
    """A new address event seen on the table's stream; `record_id` is the stream record's sequence number.

    `unsubscribed`: the address had no subscription when the event was
    written (its head said so, under the append's condition), so nobody is owed it.
    """

    address_id: str
    sequence: int
    type: str
    record_id: str
    unsubscribed: bool = False
