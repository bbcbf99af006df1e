"""DynamoDB Local as Cairn starts it (`cairn serve`, the tests): what it is told beyond its options."""

from __future__ import annotations

import os
from pathlib import Path

from cairn.local.dynamodb_local import TELEMETRY_VARIABLE, DynamoDBLocal


def started_with(database: DynamoDBLocal) -> dict[str, str]:
    """The environment the running Java process was given."""
    assert database.pid is not None
    pairs = Path(f"/proc/{database.pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)


def test_dynamodb_local_sends_no_telemetry_unless_its_user_asked(dynamodb_local: DynamoDBLocal) -> None:
    # Unset here (so `0`, Cairn's default) unless whoever runs the suite set it, which Cairn honours.
    assert started_with(dynamodb_local)[TELEMETRY_VARIABLE] == os.environ.get(TELEMETRY_VARIABLE, "0")
