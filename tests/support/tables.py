"""New tables on the run's DynamoDB Local, each test's own.

DynamoDB Local numbers the stream records of all its tables with one counter,
and every write to a table whose stream took its first record late in the run
pays for the records before it: a streamed table first written after 20,000
records elsewhere took about 12 ms a put, against 1.5 ms for one written before
them, and it stays that slow. `cairn serve` streams its table and most
end-to-end tests start one, so the streamed tables are made with a first record
as soon as the run's DynamoDB Local is up, before any test writes, and handed
out as tests ask for them.
"""

from __future__ import annotations

import uuid
from collections import deque

from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.settings import Settings

# What one worker's tests take at most in a run, with room; past it, tables are made as asked (slower).
STREAMED_TABLES = 64
# The key of the record each streamed table starts its stream with: no Cairn item has it, and it is
# deleted again, so the table is empty when handed out.
_FIRST_RECORD = {"pk": {"S": "test#first-stream-record"}, "sk": {"S": "-"}}


class RunTables:
    """Tables on `database`, streamed ones among them made up front (`STREAMED_TABLES`)."""

    def __init__(self, database: DynamoDBLocal, streamed: int = STREAMED_TABLES) -> None:
        self.database = database
        self._client = make_client(Settings(dynamodb_endpoint=database.endpoint))
        self._streamed = deque(self._started() for _ in range(streamed))

    def plain(self) -> str:
        """A new table with no stream."""
        return self._made(stream=False)

    def streamed(self) -> str:
        """A new, empty table with its stream, as `cairn serve` and the stack make it."""
        return self._streamed.popleft() if self._streamed else self._started()

    def unwritten_streamed(self) -> str:
        """A table made now whose stream has no record yet: for tests of a stream's first records."""
        return self._made(stream=True)

    def _started(self) -> str:
        name = self._made(stream=True)
        self._client.put_item(TableName=name, Item=_FIRST_RECORD)
        self._client.delete_item(TableName=name, Key=_FIRST_RECORD)
        return name

    def _made(self, *, stream: bool) -> str:
        name = f"cairn-{uuid.uuid4().hex[:12]}"
        ensure_table(self._client, name, stream=stream)
        return name
