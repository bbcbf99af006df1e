"""The paged and batched calls every table module makes, written once.

DynamoDB answers a query a page (1 MB) at a time and may leave part of a
batch unprocessed under load; these helpers follow the pages and retry the
leftovers. When the retries run out, each caller raises its own error
(`exhausted`), so its users keep seeing the error they know.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from cairn.dynamodb.items import cancellation_reasons, error_code, s
from cairn.errors import Unauthorized

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

Item = dict[str, Any]

_BATCH_WRITE_SIZE = 25
_BATCH_GET_SIZE = 100
_ATTEMPTS = 10
# The most actions one `TransactWriteItems` takes.
MAX_TRANSACTION_ACTIONS = 100
# The most items one Query page asks for (see `query`).
MAX_QUERY_PAGE_ITEMS = 1_000


def transact_write(client: DynamoDBClient, actions: Sequence[Item]) -> None:
    """One `TransactWriteItems` of actions built as plain dictionaries."""
    client.transact_write_items(TransactItems=cast("Sequence[TransactWriteItemTypeDef]", actions))


CONDITION_FAILED = "ConditionalCheckFailed"


class Cancelled(Exception):
    """A commit behind an owner's check that another condition or a conflict cancelled.

    `reasons` are those of the commit's own actions, in their order (the check's is left out).
    """

    def __init__(self, reasons: list[Item]) -> None:
        super().__init__("transaction cancelled")
        self.reasons = reasons

    def failed(self, index: int) -> Item | None:
        """The reason of action `index` when its condition failed (with the item it returned, if asked)."""
        return self.reasons[index] if failed_at(self.reasons, index) else None


def failed_at(reasons: Sequence[Item], index: int) -> bool:
    """Whether action `index` of a cancelled transaction failed its condition (`reasons`: its cancellation's)."""
    return index < len(reasons) and reasons[index].get("Code") == CONDITION_FAILED


def transact_owned(client: DynamoDBClient, owner_check: Item, actions: Sequence[Item]) -> None:
    """Commit `actions` behind `owner_check` (the address is live and the token its own), in one transaction.

    A failed owner check is `Unauthorized`, whatever else failed; any other cancellation is `Cancelled`.
    """
    try:
        transact_write(client, [owner_check, *actions])
    except ClientError as error:
        if error_code(error) != "TransactionCanceledException":
            raise
        reasons = cancellation_reasons(error)
        if reasons and reasons[0].get("Code") == CONDITION_FAILED:
            raise Unauthorized() from error
        raise Cancelled(reasons[1:]) from error


def query(client: DynamoDBClient, table: str, *, page_size: int | None = None, **params: Any) -> Iterator[Item]:
    """Every item a consistent query returns, page after page, lazily."""
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True, **params}
    limit = page_size if page_size is not None else request.get("Limit")
    if limit is not None:
        # A page size may come from a request (a runtime list's `limit`). DynamoDB refuses a Limit
        # past 32 bits, and a page holds at most 1 MB anyway: a larger size asks for this many.
        request["Limit"] = min(limit, MAX_QUERY_PAGE_ITEMS)
    while True:
        response = client.query(**request)
        yield from response.get("Items", [])
        if "LastEvaluatedKey" not in response:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def query_range(
    client: DynamoDBClient, table: str, pk: str, lower: str | None = None, upper: str | None = None, **params: Any
) -> Iterator[Item]:
    """Items of one partition, with `lower <= sk <= upper` when both are given."""
    condition = "pk = :pk"
    values = {":pk": s(pk)}
    if lower is not None and upper is not None:
        condition += " AND sk BETWEEN :lo AND :hi"
        values.update({":lo": s(lower), ":hi": s(upper)})
    return query(client, table, KeyConditionExpression=condition, ExpressionAttributeValues=values, **params)


def query_prefix(client: DynamoDBClient, table: str, pk: str, prefix: str, **params: Any) -> Iterator[Item]:
    """Items of one partition whose `sk` starts with `prefix`."""
    return query(
        client,
        table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": s(pk), ":prefix": s(prefix)},
        **params,
    )


def batch_get(
    client: DynamoDBClient,
    table: str,
    item_keys: Sequence[Item],
    *,
    exhausted: Callable[[], Exception],
    **params: Any,
) -> list[Item]:
    """The items that exist among `item_keys` (consistent reads), in no particular order.

    `params`: more of the table's request (a `ProjectionExpression`, say).
    """
    # BatchGetItem refuses a request naming one key twice (a parent run that is its own child, say).
    item_keys = list({_identity(item_key): item_key for item_key in item_keys}.values())
    found: list[Item] = []
    for start in range(0, len(item_keys), _BATCH_GET_SIZE):
        pending: dict[str, Any] = {
            table: {"Keys": list(item_keys[start : start + _BATCH_GET_SIZE]), "ConsistentRead": True, **params}
        }
        for attempt in range(_ATTEMPTS):
            response = client.batch_get_item(RequestItems=pending)
            found.extend(response.get("Responses", {}).get(table, []))
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                break
            _pause(attempt)
        else:
            raise exhausted()
    return found


def batch_delete(
    client: DynamoDBClient, table: str, item_keys: Sequence[Item], *, exhausted: Callable[[], Exception]
) -> None:
    """Delete the items in `item_keys`, in order, 25 to a call."""
    for start in range(0, len(item_keys), _BATCH_WRITE_SIZE):
        pending: dict[str, Any] = {
            table: [{"DeleteRequest": {"Key": k}} for k in item_keys[start : start + _BATCH_WRITE_SIZE]]
        }
        for attempt in range(_ATTEMPTS):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            _pause(attempt)
        else:
            raise exhausted()


def delete_partition(
    client: DynamoDBClient,
    table: str,
    pk: str,
    lower: str | None = None,
    upper: str | None = None,
    *,
    exhausted: Callable[[], Exception],
) -> None:
    """Delete every item of a partition (between two sort keys when given)."""
    item_keys = [
        {"pk": item["pk"], "sk": item["sk"]}
        for item in query_range(client, table, pk, lower, upper, ProjectionExpression="pk, sk")
    ]
    batch_delete(client, table, item_keys, exhausted=exhausted)


def _pause(attempt: int) -> None:
    """A growing pause before the leftovers of a throttled batch are sent again."""
    time.sleep(0.05 * (attempt + 1))


def _identity(item_key: Item) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """A hashable form of a key: attribute names with their typed values."""
    return tuple(sorted((name, tuple(value.items())) for name, value in item_key.items()))


def pause_after_conflict(attempt: int) -> None:
    """Wait a moment before writing the head again: an append's transaction holds it only briefly.

    Full jitter, doubling from a millisecond, so writers that met once do not meet again.
    """
    time.sleep(random.uniform(0, 0.001 * 2**attempt))


def condition_failed(error: ClientError, attempt: int) -> bool:
    """Whether a conditional update of a head failed its condition.

    False when an append's transaction held the head for a moment instead:
    after `pause_after_conflict`, the caller writes it again. Any other
    error is raised again.
    """
    code = error_code(error)
    if code == "TransactionConflictException":
        pause_after_conflict(attempt)
        return False
    if code != "ConditionalCheckFailedException":
        raise error
    return True
