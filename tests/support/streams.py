"""A table's stream read from its start, as the wake-up dispatcher is handed it."""

from __future__ import annotations

from typing import Any

from cairn.dynamodb.client import make_client, make_streams_client
from cairn.dynamodb.stream_records import event_notices
from cairn.settings import Settings
from cairn.wakeups.models import EventNotice


def stream_notices(settings: Settings) -> list[EventNotice]:
    """Every address event on the stream of `settings.table_name` so far, in stream order per shard."""
    streams = make_streams_client(settings)
    table = settings.table_name
    arn = make_client(settings).describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        ).get("ShardIterator")
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(page["Records"])  # type: ignore[arg-type]
            iterator = page.get("NextShardIterator") if page["Records"] else None
    return event_notices(records)
