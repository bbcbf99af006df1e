"""The durable runtime store on DynamoDB."""

from __future__ import annotations

from cairn.dynamodb.runtime_backend import DynamoRuntimeBackend
from cairn.runtime.store import EngineRuntimeStore


class DynamoRuntimeStore(EngineRuntimeStore):
    """Every lifecycle change is one conditional `TransactWriteItems`."""

    def __init__(self, client, table_name: str, **kwargs) -> None:
        super().__init__(DynamoRuntimeBackend(client, table_name), **kwargs)
