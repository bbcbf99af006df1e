"""The queue where a function's failed work waits for an operator, as every such queue here is made."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.checks import acknowledge


def failure_queue(scope: Construct, construct_id: str, *, keeps: str) -> sqs.Queue:
    """An encrypted, TLS-only queue that keeps what failed for 14 days; `keeps` says what lands in it.

    cdk-nag wants a dead-letter queue behind every queue; this one is the last
    stop, which an alarm watches and nothing consumes automatically.
    """
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(14),
    )
    acknowledge(
        queue,
        "AwsSolutions-SQS3",
        f"This queue is itself a failure destination: it keeps {keeps}; nothing consumes it automatically.",
    )
    return queue
