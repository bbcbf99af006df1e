"""One low-level DynamoDB client per process, configured for the deployment.

The same code talks to AWS and to DynamoDB Local; only the endpoint differs.
Clients come from botocore itself, as every client of Cairn's does (`cairn.aws`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal, overload

import botocore.session
from botocore.client import BaseClient
from botocore.config import Config

from cairn import aws
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient

# Enough pooled connections for the local server's concurrent requests.
_MAX_POOL = 256


def make_client(settings: Settings, botocore_session: botocore.session.Session | None = None) -> DynamoDBClient:
    """A thread-safe DynamoDB client with timeouts and standard retries (in `botocore_session` if given)."""
    return _client("dynamodb", settings, botocore_session)


def make_streams_client(settings: Settings) -> DynamoDBStreamsClient:
    """A DynamoDB Streams client for the same endpoint and credentials as `make_client`'s.

    DynamoDB Local serves its streams on the table port, and keeps a table's
    stream per access key unless shared, so the reader uses the writer's key.
    """
    return _client("dynamodbstreams", settings)


@overload
def _client(
    service: Literal["dynamodb"], settings: Settings, botocore_session: botocore.session.Session | None = None
) -> DynamoDBClient: ...


@overload
def _client(
    service: Literal["dynamodbstreams"], settings: Settings, botocore_session: botocore.session.Session | None = None
) -> DynamoDBStreamsClient: ...


def _client(
    service: Literal["dynamodb", "dynamodbstreams"],
    settings: Settings,
    botocore_session: botocore.session.Session | None = None,
) -> BaseClient:
    config = Config(
        retries={"mode": "standard", "max_attempts": 4},
        connect_timeout=3,
        read_timeout=10,
        max_pool_connections=_MAX_POOL,
    )
    session = botocore_session or aws.session()
    # DynamoDB Local accepts any alphanumeric key pair but still wants one.
    stand_in = "local" if settings.dynamodb_endpoint and session.get_credentials() is None else None
    return session.create_client(
        service,
        region_name=settings.region,
        config=config,
        endpoint_url=settings.dynamodb_endpoint or None,
        aws_access_key_id=stand_in,
        aws_secret_access_key=stand_in,
    )


class LazyClient:
    """The process's DynamoDB client, made on its first call and made anew by `renew`.

    Making a client reads botocore's DynamoDB model (tens of milliseconds), which
    a Lambda container then pays with its first request instead of at import,
    or never, once a SnapStart snapshot holds it (`cairn.entrypoints.snapstart`).
    `renew` drops the client and its connections; the model stays with the
    process's loader (`cairn.aws`), so the next call opens fresh connections
    with fresh credentials in a few milliseconds.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: DynamoDBClient | None = None

    def client(self) -> DynamoDBClient:
        """The client, made now if there is none."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = make_client(self._settings)
                client = self._client
        return client

    def renew(self) -> None:
        """Forget the client (connections and credentials); the next call makes a new one."""
        with self._lock:
            self._client = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client(), name)
