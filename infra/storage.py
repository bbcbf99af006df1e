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
_DELETE = "dynamodb:DeleteItem"
# An append: the head's update, the event's (and its claim's) put, the quota's condition check. A refusal
# is decided on the items its failed conditions return, with no read.
_APPEND = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]
# What each function's code issues, by its name in the service (`CairnService`): the API does everything
# the store does; the others only what their paths need (`tests/integration/test_function_grants.py` runs
# each path against its grant).
FUNCTION_ACTIONS: dict[str, list[str]] = {
    "api": STORE_ACTIONS,
    # Polls, long-polls, event streams, attachment downloads: the read counted on the head, then reads. And
    # `/mcp`, whose every call runs there (`infra.api.MCP_PATH`): its tools provision, write and delete state
    # keys, acknowledge, mail contacts and send, and create and delete subscriptions, as the API does, but
    # never write in batches (that is deleting an address or trimming a feed, which MCP does not offer).
    "streaming": [action for action in STORE_ACTIONS if action != "dynamodb:BatchWriteItem"],
    # Appends each message (the mail rate counted by an update); reads a head when the message is gone.
    "email-ingest": [*_APPEND, "dynamodb:GetItem"],
    # Appends each outcome.
    "outbound-outcomes": _APPEND,
    # Reads subscriptions and events, moves leases and cursors, schedules retries, appends failure notices.
    "wake-dispatcher": [*_APPEND, "dynamodb:GetItem", "dynamodb:Query"],
    "wake-sweep": [*_APPEND, "dynamodb:GetItem", "dynamodb:Query", "dynamodb:DeleteItem"],
    # Reads the outcome deadlines that have passed, appends each send's `email.outcome_unknown`, forgets them.
    "outbound-sweep": [*_APPEND, "dynamodb:Query", "dynamodb:DeleteItem"],
}
# Functions that delete in one partition only, by its key: the sweeps, the due items they settled
# (`WAKE#DUE`, `OUTCOME#DUE`, formatted by `cairn.dynamodb.keys`).
DELETES_ONLY_IN = {"wake-sweep": "WAKE#DUE", "outbound-sweep": "OUTCOME#DUE"}
# Functions that query one partition only: the outcome sweep reads nothing but its deadlines.
QUERIES_ONLY_IN = {"outbound-sweep": "OUTCOME#DUE"}
_QUERY = "dynamodb:Query"


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
            billing=dynamodb.Billing.on_demand(
                max_read_request_units=config.table_max_read_request_units,
                max_write_request_units=config.table_max_write_request_units,
            ),
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

    def grant_store_access(self, grantee: iam.IGrantable, *, function: str) -> None:
        """Let `grantee`, the service's function named `function`, run its item operations on this table.

        Deletes on the whole key space are the API's (deleting an address, trimming a feed) and, for `/mcp`'s
        delete_state and delete_subscription, the streaming function's, one item at a time; an
        action bound to a partition (`DELETES_ONLY_IN`, `QUERIES_ONLY_IN`) is granted on its key only.
        """
        actions = FUNCTION_ACTIONS[function]
        bound = {_DELETE: DELETES_ONLY_IN.get(function), _QUERY: QUERIES_ONLY_IN.get(function)}
        self.table.grant(grantee, *(action for action in actions if bound.get(action) is None))
        for action, partition in bound.items():
            if partition is not None and action in actions:
                iam.Grant.add_to_principal(
                    grantee=grantee,
                    actions=[action],
                    resource_arns=[self.table.table_arn],
                    conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [partition]}},
                )
