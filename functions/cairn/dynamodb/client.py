"""One low-level DynamoDB client per process, configured for the deployment.

The same code talks to AWS and to DynamoDB Local; only the endpoint differs.
"""

from __future__ import annotations

import boto3
from botocore.config import Config

from cairn.settings import Settings

# Enough pooled connections for the local server's concurrent requests.
_MAX_POOL = 256


def make_client(settings: Settings):
    """A thread-safe DynamoDB client with timeouts and standard retries."""
    config = Config(
        retries={"mode": "standard", "max_attempts": 4},
        connect_timeout=3,
        read_timeout=10,
        max_pool_connections=_MAX_POOL,
    )
    kwargs = {"region_name": settings.region, "config": config}
    if settings.dynamodb_endpoint:
        kwargs["endpoint_url"] = settings.dynamodb_endpoint
    session = boto3.session.Session()
    if settings.dynamodb_endpoint and session.get_credentials() is None:
        # DynamoDB Local accepts any alphanumeric key pair but still wants one.
        kwargs.update(aws_access_key_id="local", aws_secret_access_key="local")
    return session.client("dynamodb", **kwargs)
