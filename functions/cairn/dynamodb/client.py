"""One low-level DynamoDB client per process, configured for the deployment.

The same code talks to AWS and to DynamoDB Local; only the endpoint differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import boto3
from botocore.config import Config

from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient

# Enough pooled connections for the local server's concurrent requests.
_MAX_POOL = 256


def make_client(settings: Settings) -> DynamoDBClient:
    """A thread-safe DynamoDB client with timeouts and standard retries."""
    return _client("dynamodb", settings)


def make_streams_client(settings: Settings) -> DynamoDBStreamsClient:
    """A DynamoDB Streams client for the same endpoint and credentials as `make_client`'s.

    DynamoDB Local serves its streams on the table port, and keeps a table's
    stream per access key unless shared, so the reader uses the writer's key.
    """
    return _client("dynamodbstreams", settings)


def _client(service: Literal["dynamodb", "dynamodbstreams"], settings: Settings) -> Any:
    config = Config(
        retries={"mode": "standard", "max_attempts": 4},
        connect_timeout=3,
        read_timeout=10,
        max_pool_connections=_MAX_POOL,
    )
    session = boto3.session.Session()
    # DynamoDB Local accepts any alphanumeric key pair but still wants one.
    stand_in = "local" if settings.dynamodb_endpoint and session.get_credentials() is None else None
    return session.client(
        service,
        region_name=settings.region,
        config=config,
        endpoint_url=settings.dynamodb_endpoint or None,
        aws_access_key_id=stand_in,
        aws_secret_access_key=stand_in,
    )
