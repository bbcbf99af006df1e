"""Every runtime store implementation runs the same contract suite."""

from __future__ import annotations

import pytest

from cairn.runtime.dynamo import DynamoRuntimeStore
from cairn.runtime.memory import MemoryRuntimeStore
from cairn.settings import Settings
from cairn.store.client import make_client


@pytest.fixture(params=["memory", "dynamo"])
def store(request):
    if request.param == "memory":
        return MemoryRuntimeStore()
    if request.param == "dynamo":
        database = request.getfixturevalue("dynamodb_local")
        table = request.getfixturevalue("local_table")
        return DynamoRuntimeStore(make_client(Settings(dynamodb_endpoint=database.endpoint)), table)
    raise AssertionError(request.param)
