"""Product memory on DynamoDB Local: concurrent appends to one run lose nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from cairn.dynamodb.client import make_client
from cairn.dynamodb.memory_table import MemoryTable
from cairn.settings import Settings
from cairn.transcript.memory import PLANNER_NOTE, MemoryEvent, MemoryStore

WRITERS = 8
APPENDS = 15


def test_concurrent_writers_get_gap_free_sequences_and_whole_batches(dynamodb_local, local_table: str):
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    at = datetime(2026, 11, 29, tzinfo=UTC)

    def write(writer: int) -> list[list[int]]:
        # One store per writer, as separate Lambda containers would have.
        memory = MemoryStore(MemoryTable(client, local_table))
        batches = []
        for n in range(APPENDS):
            batch = [MemoryEvent(PLANNER_NOTE, at, {"note": f"{writer}:{n}:{part}"}) for part in range(2)]
            batches.append(memory.append_events("agent", "busy-run", batch))
        return batches

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        assigned = [batch for batches in pool.map(write, range(WRITERS)) for batch in batches]

    events = MemoryStore(MemoryTable(client, local_table)).load_run("agent", "busy-run").events
    total = WRITERS * APPENDS * 2
    assert [event.sequence for event in events] == list(range(1, total + 1))
    assert sorted(sequence for batch in assigned for sequence in batch) == list(range(1, total + 1))
    assert len({event.data["note"] for event in events}) == total
    for first, second in zip(events[::2], events[1::2], strict=True):
        # A batch is two consecutive events, part 0 then part 1 of the same append.
        assert first.data["note"][:-1] == second.data["note"][:-1]
        assert (first.data["note"][-1], second.data["note"][-1]) == ("0", "1")
    for writer in range(WRITERS):
        mine = [e.data["note"] for e in events if e.data["note"].startswith(f"{writer}:")]
        assert mine == [f"{writer}:{n}:{part}" for n in range(APPENDS) for part in range(2)]
