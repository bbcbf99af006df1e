"""One way to send a delivery, whatever the target's kind."""

from __future__ import annotations

import logging
from typing import Protocol

import msgspec

from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.models import Delivery, Outcome, Subscription, TargetKind
from cairn.wakeups.webhook import WebhookTransport

logger = logging.getLogger(__name__)

# An attempt keeps this much of an unexpected error's text (it is shown with the subscription).
_MAX_ERROR_TEXT = 300


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
    """`transport.send`, with anything it raises made a failed attempt like any other, and its error's text cut.

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
        logger.exception("a wake-up transport raised instead of answering with an outcome")
        return Outcome(delivered=False, error=f"{type(error).__name__}: {error}"[:_MAX_ERROR_TEXT])
    if outcome.error is not None and len(outcome.error) > _MAX_ERROR_TEXT:
        return msgspec.structs.replace(outcome, error=outcome.error[:_MAX_ERROR_TEXT])
    return outcome
