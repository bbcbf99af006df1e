"""One way to send a delivery, whatever the target's kind."""

from __future__ import annotations

from typing import Protocol

from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.models import Delivery, Outcome, Subscription, TargetKind
from cairn.wakeups.webhook import WebhookTransport


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
