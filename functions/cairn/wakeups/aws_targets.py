"""Deliveries to AWS services: SQS, EventBridge, Lambda (asynchronous), Step Functions and durable callbacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cairn.wakeups.models import Delivery, Outcome, Subscription, TargetKind
from cairn.wakeups.targets import MAX_DETAIL_TYPE_LENGTH

# Message size limits: SQS 1 MiB, Lambda asynchronous 1 MB, EventBridge 256 KB an entry,
# Step Functions 262,144 characters of output, a durable callback's result 262,144 bytes (what a
# durable execution checkpoints). A larger delivery goes without the event's data: what is left
# names the address, the sequence and the event id, to read the event from the feed.
MAX_BODY = {
    TargetKind.SQS: 1_000_000,
    TargetKind.LAMBDA: 1_000_000,
    TargetKind.EVENTBRIDGE: 250_000,
    TargetKind.STEP_FUNCTIONS: 262_144,
    TargetKind.LAMBDA_DURABLE_CALLBACK: 262_144,
}
EVENT_SOURCE = "cairn"
# The `DetailType` of an event whose type EventBridge would not take.
DEFAULT_DETAIL_TYPE = "cairn.event"
# A task that no longer waits: the callback can never succeed.
_GONE_TASK_CODES = {"TaskDoesNotExist", "TaskTimedOut", "InvalidToken"}
# A durable callback that no longer waits (timed out, already completed, its execution gone) or
# that Lambda does not take as a callback id: no retry can complete it.
_GONE_CALLBACK_CODES = {"CallbackTimeoutException", "ResourceNotFoundException", "InvalidParameterValueException"}
# Errors of an attempt whose request may have reached the service without its answer reaching us.
_UNANSWERED_ERRORS = ("ReadTimeoutError", "ConnectionClosedError")


class AwsTargets:
    """Sends to AWS targets with clients made on first use (`client_factory(service)`)."""

    def __init__(self, client_factory: Callable[[str], Any]) -> None:
        self._factory = client_factory
        self._clients: dict[str, Any] = {}

    def send(self, subscription: Subscription, delivery: Delivery) -> Outcome:
        kind = subscription.target.kind
        body = delivery.body if len(delivery.body.encode()) <= MAX_BODY[kind] else delivery.compact_body
        try:
            return self._deliver(subscription, delivery, body)
        except ClientError as error:
            details = error.response.get("Error", {})
            code = details.get("Code", "")
            text = f"{code}: {details.get('Message')}"
            if kind is TargetKind.STEP_FUNCTIONS and code in _GONE_TASK_CODES:
                return Outcome(delivered=False, gone=True, error=text)
            if kind is TargetKind.LAMBDA_DURABLE_CALLBACK and code in _GONE_CALLBACK_CODES:
                if _may_have_completed(subscription):
                    # Most likely by the attempt whose answer was lost: the wait is over, not failed.
                    text = f"{text} (an earlier attempt, whose answer never came, may have completed it)"
                    return Outcome(delivered=False, gone=True, error=text)
                return Outcome(delivered=False, permanent=True, error=text)
            return Outcome(delivered=False, error=text)
        except BotoCoreError as error:
            return Outcome(delivered=False, error=f"{type(error).__name__}: {error}")

    def _deliver(self, subscription: Subscription, delivery: Delivery, body: str) -> Outcome:
        kind = subscription.target.kind
        params = subscription.target.params
        if kind is TargetKind.SQS:
            return self._sqs(subscription, delivery, body)
        if kind is TargetKind.EVENTBRIDGE:
            return self._eventbridge(params, delivery, body)
        if kind is TargetKind.LAMBDA:
            answer = self._client("lambda").invoke(
                FunctionName=params["function_arn"], InvocationType="Event", Payload=body.encode()
            )
            return Outcome(delivered=answer.get("StatusCode") == 202, status_code=answer.get("StatusCode"))
        if kind is TargetKind.LAMBDA_DURABLE_CALLBACK:
            # What the waiting function's callback resolves to: the delivery, as JSON text.
            self._client("lambda").send_durable_execution_callback_success(
                CallbackId=params["callback_id"], Result=body.encode()
            )
            return Outcome(delivered=True)
        self._client("stepfunctions").send_task_success(taskToken=params["task_token"], output=body)
        return Outcome(delivered=True)

    def _sqs(self, subscription: Subscription, delivery: Delivery, body: str) -> Outcome:
        queue_url = subscription.target.params["queue_url"]
        request: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
        if queue_url.endswith(".fifo"):
            # One group per subscription keeps its order; the event id deduplicates retries.
            request["MessageGroupId"] = f"{subscription.address_id}.{subscription.id}"
            request["MessageDeduplicationId"] = delivery.message_id
        self._client("sqs").send_message(**request)
        return Outcome(delivered=True)

    def _eventbridge(self, params: Any, delivery: Delivery, body: str) -> Outcome:
        entry = {
            "Source": EVENT_SOURCE,
            "DetailType": params.get("detail_type") or _detail_type(delivery.event_type),
            "Detail": body,
            "EventBusName": params["event_bus_arn"],
        }
        answer = self._client("events").put_events(Entries=[entry])
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            return Outcome(delivered=False, error=f"{failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")
        return Outcome(delivered=True)

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._factory(service)
        return self._clients[service]


def _may_have_completed(subscription: Subscription) -> bool:
    """Whether an earlier attempt may have completed this one-shot target though it was never told so."""
    return any(attempt.error and attempt.error.startswith(_UNANSWERED_ERRORS) for attempt in subscription.attempts)


def _detail_type(event_type: str) -> str:
    """The event's type as a `DetailType`: at most EventBridge's 128 characters, and printable, as rules match it.

    A stranger's inbox post chooses the type (up to 256 characters, any text); one EventBridge
    refused failed that delivery on every retry, and the subscription with it.
    """
    if event_type.isprintable() and event_type.strip():
        return event_type[:MAX_DETAIL_TYPE_LENGTH]
    return DEFAULT_DETAIL_TYPE
