"""The durable runtime store on DynamoDB."""

from __future__ import annotations

from cairn.runtime.store import EngineRuntimeStore
from cairn.store.runtime_backend import DynamoRuntimeBackend


class DynamoRuntimeStore(EngineRuntimeStore):
    """Every lifecycle change is one conditional `TransactWriteItems`."""

    def __init__(self, client, table_name: str, **kwargs) -> None:
        super().__init__(DynamoRuntimeBackend(client, table_name), **kwargs)
