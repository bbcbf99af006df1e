"""Every runtime store implementation runs the same contract suite."""

from __future__ import annotations

import httpx
import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.http import HttpRuntimeStore
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.settings import Settings
from tests.contract.builders import T0, root_start
from tests.support.lambda_client import LambdaClient, make_services


@pytest.fixture(params=["memory", "dynamo", "http"])
def store(request):
    """The in-memory engine, the DynamoDB engine, and the HTTP client through the service's routes.

    The HTTP store proves the wire (routes, schemas, error mapping, the
    client) and runs on the in-memory engine: the DynamoDB engine has its
    own run here, and `tests/e2e/test_runtime_http.py` drives the whole
    chain over a socket on DynamoDB Local.
    """
    if request.param == "memory":
        yield InMemoryRuntimeStore()
        return
    if request.param == "dynamo":
        database = request.getfixturevalue("dynamodb_local")
        table = request.getfixturevalue("local_table")
        yield DynamoRuntimeStore(make_client(Settings(dynamodb_endpoint=database.endpoint)), table)
        return
    # The service's own resolver and routes, reached through httpx without a socket.
    api = LambdaClient(
        make_services(
            clock=request.getfixturevalue("clock"), runtime=InMemoryRuntimeStore(), runtime_key="contract-key"
        )
    )
    client = HttpRuntimeStore(
        "http://cairn.test", runtime_key="contract-key", transport=httpx.MockTransport(api.handle)
    )
    yield client
    client.close()


@pytest.fixture
def session(store):
    store.create_session("session", T0)
    return "session"


@pytest.fixture
def running(store, session):
    command = root_start()
    store.start_root_run(command)
    return command
