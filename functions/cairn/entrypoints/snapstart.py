"""Lambda SnapStart: what a function does before its snapshot and after each restore.

With SnapStart, Lambda initializes a published version once and starts new
containers from a snapshot of its memory. Before the snapshot the DynamoDB
client is made, so restored containers skip reading botocore's model. After
a restore the client is renewed (connections opened before the snapshot
are not guaranteed to work, and the credentials it holds are the snapshot's)
and `random` is reseeded, so containers restored from one snapshot do not
share a back-off jitter sequence. Read tokens and secrets come from
`secrets`, which reads the operating system's generator on every call and
needs nothing.

Source: https://docs.aws.amazon.com/lambda/latest/dg/snapstart-runtime-hooks-python.html
and .../snapstart-uniqueness.html.
"""

from __future__ import annotations

import random
from importlib import import_module

from cairn.dynamodb.client import LazyClient


def before_snapshot(client: LazyClient) -> None:
    """Make the client now, so the snapshot holds it."""
    client.client()


def after_restore(client: LazyClient) -> None:
    """Fresh connections, credentials and jitter for a container restored from the snapshot."""
    client.renew()
    random.seed()


def install(client: LazyClient) -> None:
    """Register both hooks with the Lambda runtime; elsewhere (no runtime hooks module) there is no snapshot."""
    try:
        hooks = import_module("snapshot_restore_py")  # bundled in Lambda's Python runtimes since 3.12
    except ImportError:
        return
    hooks.register_before_snapshot(before_snapshot, client)
    hooks.register_after_restore(after_restore, client)
