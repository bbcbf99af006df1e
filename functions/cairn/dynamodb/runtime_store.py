"""The durable runtime store on DynamoDB: the runtime's rules over this adapter's backend."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from cairn.dynamodb.runtime_backend import DynamoRuntimeBackend
from cairn.runtime.store import EngineRuntimeStore, utc_now

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


class DynamoRuntimeStore(EngineRuntimeStore):
    """Every lifecycle change is one conditional `TransactWriteItems`."""

    def __init__(self, client: DynamoDBClient, table_name: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        super().__init__(DynamoRuntimeBackend(client, table_name), clock=clock)
