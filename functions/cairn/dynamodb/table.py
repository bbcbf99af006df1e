"""Create the single table (local runs and tests; CDK owns it in AWS)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import WaiterConfigTypeDef


def ensure_table(client: DynamoDBClient, table_name: str) -> None:
    """Create the table with its TTL attribute unless it already exists."""
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
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        return
    # botocore sleeps `Delay` seconds, a fraction included (the stubs say int): DynamoDB Local is ready in moments.
    waiting = cast("WaiterConfigTypeDef", {"Delay": 0.2, "MaxAttempts": 100})
    client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig=waiting)
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )
