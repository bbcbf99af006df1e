"""The single DynamoDB table that holds every Cairn item (see the storage layout)."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.config import StageConfig


class CairnTable(Construct):
    """Single-table store with string keys `pk`/`sk` and TTL on `expires_at`.

    The table name is left to CloudFormation so stages never collide and the
    table is never replaced just because a name changed. Construct ids here
    are part of the table's logical id: renaming them replaces the table.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            # TTL only reclaims space, days late; reads filter `expires_at` themselves.
            time_to_live_attribute="expires_at",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=not config.ephemeral,
            removal_policy=config.removal_policy,
        )
