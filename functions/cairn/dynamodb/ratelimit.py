"""Fixed windows (one minute unless a caller asks for longer) counted in DynamoDB, shared by every instance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.addresses.rate_windows import WINDOW_SECONDS, retry_after, window_of
from cairn.dynamodb import keys
from cairn.dynamodb.items import error_code, key, n

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


class RateLimiter:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def hit(
        self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
    ) -> int | None:
        """Count one use; return the seconds to wait when over `limit`, else None."""
        update = count_action(self._table, scope, subject, limit=limit, now=now, window_seconds=window_seconds)
        try:
            self._client.update_item(**update["Update"])
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return retry_after(now, window_seconds)
            raise
        return None


def count_action(
    table: str, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
) -> dict[str, Any]:
    """One use of the window of `now` as a transaction action: it fails its condition when `limit` is reached."""
    window = window_of(now, window_seconds)
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.rate_pk(scope, subject), keys.rate_sk(window)),
            "UpdateExpression": "ADD hits :one SET expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(hits) OR hits < :limit",
            "ExpressionAttributeValues": {
                ":one": n(1),
                ":limit": n(limit),
                ":expires": n((window + 2) * window_seconds),
            },
        }
    }
