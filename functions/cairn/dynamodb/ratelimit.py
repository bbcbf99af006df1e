"""Fixed windows (one minute unless a caller asks for longer) counted in DynamoDB, shared by every instance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.addresses.rate_windows import WINDOW_SECONDS, retry_after, window_of
from cairn.dynamodb import keys
from cairn.dynamodb.items import error_code, get_int, key, n

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

    def spent(
        self, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
    ) -> int | None:
        """The seconds to wait when `limit` uses are counted in the window of `now`, else None; counts nothing."""
        counted = self._client.get_item(
            TableName=self._table,
            Key=_window_key(scope, subject, window_of(now, window_seconds)),
            ProjectionExpression="hits",
        ).get("Item", {})
        if get_int(counted, "hits") < limit:
            return None
        return retry_after(now, window_seconds)


def count_action(
    table: str, scope: str, subject: str, *, limit: int, now: float, window_seconds: int = WINDOW_SECONDS
) -> dict[str, Any]:
    """One use of the window of `now` as a transaction action: it fails its condition when `limit` is reached."""
    window = window_of(now, window_seconds)
    return {
        "Update": {
            "TableName": table,
            "Key": _window_key(scope, subject, window),
            "UpdateExpression": "ADD hits :one SET expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(hits) OR hits < :limit",
            "ExpressionAttributeValues": {
                ":one": n(1),
                ":limit": n(limit),
                ":expires": n((window + 2) * window_seconds),
            },
        }
    }


def _window_key(scope: str, subject: str, window: int) -> dict[str, dict[str, str]]:
    return key(keys.rate_pk(scope, subject), keys.rate_sk(window))
