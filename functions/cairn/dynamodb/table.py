"""Create the single table (local runs and tests; CDK owns it in AWS)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import StreamSpecificationTypeDef, WaiterConfigTypeDef


# New item images feed the wake-up dispatcher (`cairn.wakeups`), as the stack's stream does in AWS.
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}


def ensure_table(client: DynamoDBClient, table_name: str, *, stream: bool = True) -> None:
    """Create the table with its TTL attribute and its stream unless it already exists.

    A table made before wake-ups existed gets its stream added. `stream=False`
    is for tests that dispatch no wake-ups: DynamoDB Local keeps every
    stream a day after its table is deleted, and each one it keeps makes its
    writes and table creations slower.
    """
    streaming: dict[str, Any] = {"StreamSpecification": STREAM} if stream else {}
    try:
        client.create_table(
            TableName=table_name,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
            **streaming,
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        if stream:
            _ensure_stream(client, table_name)
        return
    # botocore sleeps `Delay` seconds, a fraction included (the stubs say int): DynamoDB Local is ready in moments.
    waiting = cast("WaiterConfigTypeDef", {"Delay": 0.2, "MaxAttempts": 100})
    client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig=waiting)
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )


def _ensure_stream(client: DynamoDBClient, table_name: str) -> None:
    described = client.describe_table(TableName=table_name)["Table"]
    if not described.get("StreamSpecification", {}).get("StreamEnabled"):
        client.update_table(TableName=table_name, StreamSpecification=cast("StreamSpecificationTypeDef", STREAM))
