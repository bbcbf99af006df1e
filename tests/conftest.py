"""Shared fixtures: moto or the in-memory ports for unit tests, one DynamoDB Local per session for
integration tests, and `cairn serve` processes for end-to-end tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Unit tests must never reach a real AWS account.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
# The run's DynamoDB Locals (and those `cairn serve` starts) live minutes and answer many different small
# requests: the JVM's quick compiler alone is enough there, and its optimising one, which pays off only in
# long runs, cost about a fifth of the suite's processor time. The bench keeps the JVM's defaults.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

from cairn.local.dynamodb_local import DynamoDBLocal  # noqa: E402
from tests.support.fakes import FakeClock  # noqa: E402
from tests.support.lambda_client import LambdaClient, make_services  # noqa: E402
from tests.support.serve import ServeProcess  # noqa: E402
from tests.support.tables import RunTables  # noqa: E402

# The slowest tiers first, so that under pytest-xdist the long modules start early and the many
# short unit modules fill the workers' last minutes.
_TIER_ORDER = ("e2e", "contract", "integration", "infra", "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tiers in `_TIER_ORDER`, each module's tests together: `make test` has pytest-xdist hand them
    out in this order, one at a time, to whichever worker is free."""

    def tier(item: pytest.Item) -> str:
        parts = item.path.relative_to(config.rootpath).parts
        return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""

    items.sort(key=lambda item: _TIER_ORDER.index(tier(item)) if tier(item) in _TIER_ORDER else len(_TIER_ORDER))


# Tests handed out together, to one worker, ahead of the rest, each group what its tests share
# within a process and would otherwise make once on every worker. The infra tests synthesize stacks
# and read them through the CDK's assertions, which run in a node process that each worker starts and
# fills with the CDK's JavaScript on first use: spread over every worker, that load was paid once per
# worker (a run's largest node cost), and on one it is paid once. The architecture map's tests share
# one parse of every source file (about 4 s of processor time).
_ONE_WORKER = ("tests/infra/", "tests/unit/test_architecture_map.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist load`, but with each of `_ONE_WORKER`'s groups as one unit: every other test is a unit of its own,
    handed out in the order above to whichever worker has two or fewer left (xdist's scoped scheduler)."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerFor(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((prefix for prefix in _ONE_WORKER if nodeid.startswith(prefix)), nodeid)

    # Largest unit first (xdist's default for scoped units); the others keep their order.
    config.option.loadscopereorder = True
    return OneWorkerFor(config, log)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def moto_env() -> Iterator[None]:
    """moto's in-memory AWS; build clients inside it with other limits as needed."""
    import boto3
    from moto import mock_aws

    from cairn import aws
    from tests.support.moto_transactions import copy_each_table_once_per_transaction

    copy_each_table_once_per_transaction()
    with mock_aws():
        # moto drops boto3's default session; the one put back reads service models through the
        # process's loader, so a test's clients don't parse botocore's JSON again (most of their cost).
        boto3.setup_default_session(botocore_session=aws.session())
        yield


@pytest.fixture
def moto_api(moto_env: None, clock: FakeClock) -> LambdaClient:
    """The API resolver on moto, called with API Gateway events."""
    return LambdaClient.on_moto(clock)


@pytest.fixture
def memory_api(clock: FakeClock) -> LambdaClient:
    """The API resolver on the in-memory address ports, for tests of address behaviour, not of DynamoDB."""
    return LambdaClient.in_memory(clock)


@pytest.fixture(scope="session")
def run_tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunTables]:
    """One DynamoDB Local for the whole run, its data in memory (the folder holds its log), and the
    streamed tables its tests will take, made before any test writes (`tests/support/tables.py`)."""
    with DynamoDBLocal(tmp_path_factory.mktemp("dynamodb"), in_memory=True) as database:
        yield RunTables(database)


@pytest.fixture(scope="session")
def dynamodb_local(run_tables: RunTables) -> DynamoDBLocal:
    return run_tables.database


@pytest.fixture
def local_table(run_tables: RunTables) -> str:
    """A fresh table on DynamoDB Local for one test, with no stream: its writes add no stream
    records, which DynamoDB Local keeps a day, even past their table. Tests that start `cairn serve`
    (which streams its table) or read a stream take a `streamed_table`."""
    return run_tables.plain()


@pytest.fixture
def streamed_table(run_tables: RunTables) -> str:
    """A fresh table on DynamoDB Local with its stream, as `cairn serve` and the stack make it."""
    return run_tables.streamed()


@pytest.fixture
def local_api(dynamodb_local: DynamoDBLocal, local_table: str, clock: FakeClock) -> LambdaClient:
    """The API resolver on DynamoDB Local (real transactions and concurrency)."""
    services = make_services(table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock)
    return LambdaClient(services)


@pytest.fixture
def served(request: pytest.FixtureRequest, dynamodb_local: DynamoDBLocal, tmp_path: Path) -> Iterator[ServeProcess]:
    """`cairn serve` over HTTP, on the session's DynamoDB Local: a new one for each test, or the
    module's one in a module marked `one_server`."""
    if request.node.get_closest_marker("one_server"):
        yield request.getfixturevalue("module_served")
        return
    table = request.getfixturevalue("streamed_table")
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=table) as server:
        yield server


@pytest.fixture(scope="module")
def module_served(run_tables: RunTables, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One `cairn serve` for the tests of a module whose tests each work on addresses of their own
    (one on each worker that runs some of them).

    Marked `one_server`, a module's tests get it as `served`: a server takes a
    second or two to start and stop.
    """
    with ServeProcess(
        tmp_path_factory.mktemp("served"),
        dynamodb_endpoint=run_tables.database.endpoint,
        table=run_tables.streamed(),
    ) as server:
        yield server
