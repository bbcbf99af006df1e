"""`cairn serve`'s stream reader on DynamoDB Local, whose stream records share one counter across its tables.

A reader starts on an empty shard with an iterator at the shard's start. A
number taken before the shard's first record (a cancelled transaction here;
another table's write does the same) puts that start before the first record,
and DynamoDB Local refuses the iterator as trimmed. The reader must read on.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from cairn.dynamodb.client import make_client, make_streams_client
from cairn.local.wakeups import StreamFollower
from cairn.settings import Settings
from cairn.wakeups.models import EventNotice
from tests.support.tables import RunTables


class Seen:
    def __init__(self) -> None:
        self.notices: list[EventNotice] = []

    def dispatch(self, notices: list[EventNotice]) -> list[EventNotice]:
        self.notices.extend(notices)
        return []


def event(address: str, sequence: int) -> dict:
    return {"pk": {"S": f"A#{address}"}, "sk": {"S": f"E#{sequence:012d}"}, "type": {"S": "approval.decided"}}


def test_the_first_event_is_dispatched_after_a_cancelled_transaction_took_a_number(run_tables: RunTables):
    streamed_table = run_tables.unwritten_streamed()  # its shard empty, as a new `cairn serve`'s is
    settings = Settings(dynamodb_endpoint=run_tables.database.endpoint)
    client = make_client(settings)
    arn = client.describe_table(TableName=streamed_table)["Table"]["LatestStreamArn"]
    follower = StreamFollower(make_streams_client(settings), arn, seen := Seen())  # type: ignore[arg-type]
    follower._discover()
    follower._read_all()  # the empty shard, as when `cairn serve` starts
    with pytest.raises(ClientError):  # an append that lost its condition, say
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": streamed_table, "Item": event("addr_a", 9)}},
                {
                    "ConditionCheck": {
                        "TableName": streamed_table,
                        "Key": {"pk": {"S": "nothing"}, "sk": {"S": "here"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    client.put_item(TableName=streamed_table, Item=event("addr_a", 1))
    client.put_item(TableName=streamed_table, Item=event("addr_a", 2))

    for _ in range(3):
        follower._read_all()
    assert [(notice.address_id, notice.sequence) for notice in seen.notices] == [("addr_a", 1), ("addr_a", 2)]
