"""One way to send a delivery, whatever the target's kind."""

from __future__ import annotations

import logging
from typing import Protocol
from urllib.parse import quote

import msgspec

from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.models import Delivery, Outcome, Subscription, TargetKind
from cairn.wakeups.webhook import WebhookTransport

logger = logging.getLogger(__name__)

# An attempt keeps this much of an unexpected error's text (it is shown with the subscription).
_MAX_ERROR_TEXT = 300
# The parameters that are a one-shot target's secret: whoever holds one can complete the wait.
_SECRET_PARAMS = ("callback_id", "task_token")


class Transport(Protocol):
    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        """Send once; never raises for anything the target does (that is an `Outcome`)."""


class Transports:
    """Webhooks over HTTP, every other kind through its AWS service."""

    def __init__(self, webhook: WebhookTransport, aws: AwsTargets) -> None:
        self._webhook = webhook
        self._aws = aws

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        if subscription.target.kind is TargetKind.WEBHOOK:
            return self._webhook.send(subscription, delivery, now)
        return self._aws.send(subscription, delivery)


def send_once(transport: Transport, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
    """`transport.send`, with anything it raises made a failed attempt like any other, and its error's text
    cut and rid of the target's secret (botocore names the request's URL, where a callback id is a segment).

    Left to rise, an unforeseen error (a defect, or a stored target no request
    can carry) would leave the subscription active with no attempt recorded
    and its event handed out again and again; as a failure it is recorded,
    backed off and counted until the retry window ends the subscription. The
    text is cut because the target writes it: an error quoting a 100 KB
    header line of an answer made an attempt DynamoDB could not store.
    """
    try:
        outcome = transport.send(subscription, delivery, now)
    except Exception as error:
        text = without_secrets(f"{type(error).__name__}: {error}", subscription)
        logger.error("a wake-up transport raised instead of answering with an outcome: %s", text[:_MAX_ERROR_TEXT])
        outcome = Outcome(delivered=False, error=text)
    if outcome.error is not None:
        return msgspec.structs.replace(outcome, error=without_secrets(outcome.error, subscription)[:_MAX_ERROR_TEXT])
    return outcome


def without_secrets(text: str, subscription: Subscription) -> str:
    """`text` with the target's secret, as given or percent-encoded, taken out: attempts are shown to the owner
    and a failure's reason goes into the feed, but the id or token is never shown again once subscribed."""
    params = subscription.target.params
    for secret in (params[name] for name in _SECRET_PARAMS if params.get(name)):
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            text = text.replace(form, "<secret>")
    return text
