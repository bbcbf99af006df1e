"""The single DynamoDB table that holds every Cairn item (see the storage layout)."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import StageConfig

# The item operations the store issues. TransactWriteItems and TransactGetItems
# have no IAM action of their own: each part is authorized as the item action
# it performs, so conditions need ConditionCheckItem. No Scan, no stream reads,
# no table management.
STORE_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
]


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
            # The AWS managed key (aws/dynamodb): its use shows in CloudTrail,
            # without a customer key to own, rotate and pay for.
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            # New events wake subscribers (infra/wakeups.py); only new images are needed.
            dynamo_stream=dynamodb.StreamViewType.NEW_IMAGE,
            deletion_protection=not config.ephemeral,
            removal_policy=config.removal_policy,
        )

    def grant_store_access(self, grantee: iam.IGrantable) -> None:
        """Let `grantee` run the store's item operations on this table, and nothing more."""
        self.table.grant(grantee, *STORE_ACTIONS)
