"""What a stream costs DynamoDB Local's writes: the same append without one, on the first table with one, on a second.

`cairn serve`'s table has a stream (the wake-ups read it), the raw inbox
baseline's table has none. Here one writer appends with the baseline's
transaction (head Update + event Put) to three tables of a DynamoDB Local
started for this part alone: one without a stream, then the first table with
a stream, then a second one. The part has its own DynamoDB Local because a
stream, once made, slows the writes to every table with a stream made after
it, for the rest of that DynamoDB Local's life (its streams outlive their
tables by a day); the bench's shared one keeps a single streamed table, the
server's.
"""

from __future__ import annotations

from pathlib import Path

from bench.baseline import raw_writers
from bench.report import Table
from bench.timing import LoadResult, run_load
from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.settings import Settings

NO_STREAM = "table without a stream"
FIRST_STREAM = "first table with a stream"
SECOND_STREAM = "second table with a stream, after the first's rows"


def measure_stream_tables(settings: Settings, workdir: Path, seconds: float, warmup: float) -> Table:
    """One writer's appends per second on each table, after warming the new DynamoDB Local's JVM."""
    results: dict[str, LoadResult] = {}
    with DynamoDBLocal(workdir / "dynamodb-streams") as database:
        client = make_client(settings.replace(dynamodb_endpoint=database.endpoint))
        for number, (label, stream) in enumerate(((NO_STREAM, False), (FIRST_STREAM, True), (SECOND_STREAM, True))):
            table_name = f"bench-streams-{number}"
            ensure_table(client, table_name, stream=stream)
            append = raw_writers(client, table_name, "BENCH#STREAMS", threads=1, heads=1)[0].append
            # A DynamoDB Local just started answers slower until its JVM has warmed: the first row waits longer.
            run_load([append], warmup if number else warmup + 2 * seconds)
            results[label] = run_load([append], seconds)

    table = Table(
        f"DynamoDB Local's writes and its streams: raw appends by 1 writer ({seconds:g} s per row)",
        ["table", "appends", "appends/s", "p50 ms", "p99 ms", "appends/s vs no stream"],
    )
    plain = results[NO_STREAM].per_second
    for label, result in results.items():
        table.add(
            label, result.operations, result.per_second, result.p50_ms(), result.p99_ms(),
            f"{100 * result.per_second / plain:.0f} %",
        )  # fmt: skip
    table.notes += [
        "The raw inbox baseline's transaction (head Update + event Put) on three tables of a DynamoDB Local of "
        "this part's own, made in this order; nothing reads the streams.",
        "`cairn serve`'s table is the first with a stream in the DynamoDB Local it starts; the raw baseline's "
        "table has none.",
    ]
    return table
