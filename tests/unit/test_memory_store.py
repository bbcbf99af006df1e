"""Product memory on moto: typed events in commit order, exact data, atomic appends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.memory_table import MemoryTable
from cairn.dynamodb.table import ensure_table
from cairn.errors import PayloadTooLarge
from cairn.settings import Settings
from cairn.transcript import exactjson
from cairn.transcript.errors import MemoryRequestError
from cairn.transcript.memory import (
    ASSISTANT_MESSAGE,
    PLANNER_NOTE,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
    MemoryEvent,
    MemoryStore,
)
from tests.support.fakes import FakeClock

AT = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
EXAMPLES = [
    MemoryEvent(USER_MESSAGE, AT, {"message": "Summarize sales", "structured": {"quarter": 3}}, {"role": "user"}),
    MemoryEvent(THINKING, AT, {"text": "need data", "signature": "sig", "content_index": 0, "final": True}),
    MemoryEvent(
        TOOL_CALL,
        AT,
        {
            "tool_call_id": "call-1",
            "tool_name": "reports.summarize",
            "payload": '{"query":"sales"}',
            "queue": "tools",
            "expected_children_total": 0,
        },
    ),
    MemoryEvent(
        TOOL_RESULT,
        AT,
        {
            "tool_call_id": "call-1",
            "tool_name": "reports.summarize",
            "result_json": '{"rows":3}',
            "preview": "3 rows",
            "duration": 1500000,
            "bounds": {"returned": 3, "truncated": False},
        },
    ),
    MemoryEvent(PLANNER_NOTE, AT, {"note": "answer from the report"}),
    MemoryEvent(ASSISTANT_MESSAGE, AT, {"message": "Sales rose.", "structured": {"growth": exactjson.Number("0.10")}}),
]


TABLE = "cairn-test"


@pytest.fixture
def client(moto_env):
    client = make_client(Settings(table_name=TABLE))
    ensure_table(client, TABLE)
    return client


@pytest.fixture
def memory(client, clock: FakeClock) -> MemoryStore:
    return MemoryStore(MemoryTable(client, TABLE), clock)


def test_events_come_back_in_order_with_exact_data(memory: MemoryStore):
    assert memory.append_events("chat.assistant", "run-1", EXAMPLES[:2]) == [1, 2]
    assert memory.append_events("chat.assistant", "run-1", EXAMPLES[2:]) == [3, 4, 5, 6]
    snapshot = memory.load_run("chat.assistant", "run-1")
    assert [event.sequence for event in snapshot.events] == [1, 2, 3, 4, 5, 6]
    assert [event.type for event in snapshot.events] == [event.type for event in EXAMPLES]
    assert [event.data for event in snapshot.events] == [event.data for event in EXAMPLES]
    assert snapshot.events[0].labels == {"role": "user"}
    assert snapshot.events[5].data["structured"]["growth"].literal == "0.10"
    assert snapshot.events[0].timestamp == AT.replace(microsecond=123000)
    assert snapshot.meta == {"next_cursor": 6, "has_more": False}


def test_runs_are_separate_and_an_unknown_run_is_empty(memory: MemoryStore):
    memory.append_events("agent", "run-1", EXAMPLES[:1])
    memory.append_events("agent", "run-2", EXAMPLES[:1])
    memory.append_events("other-agent", "run-1", EXAMPLES[:1])
    assert [e.sequence for e in memory.load_run("agent", "run-2").events] == [1]
    assert memory.load_run("agent", "run-3").events == []


def test_an_event_without_a_time_gets_the_time_of_its_append(memory: MemoryStore, clock: FakeClock):
    memory.append_events("agent", "run", [MemoryEvent(PLANNER_NOTE, data={"note": "now"})])
    (event,) = memory.load_run("agent", "run").events
    assert abs(event.timestamp.timestamp() - clock()) < 0.001


def test_pages_follow_the_cursor(memory: MemoryStore):
    memory.append_events("agent", "run", [MemoryEvent(PLANNER_NOTE, AT, {"note": f"n{i}"}) for i in range(5)])
    first = memory.load_run("agent", "run", limit=2)
    assert [e.data["note"] for e in first.events] == ["n0", "n1"] and first.meta == {"next_cursor": 2, "has_more": True}
    rest = memory.load_run("agent", "run", after=2)
    assert [e.sequence for e in rest.events] == [3, 4, 5] and rest.meta["has_more"] is False
    # Each note is 13 bytes of data and 17 as Lambda carries it (its four quotes escaped), its type 16,
    # its labels 2, its sequence, time and field names 128: 163 in all.
    small = memory.load_run("agent", "run", max_bytes=326)
    assert len(small.events) == 2 and small.meta["has_more"]
    assert len(memory.load_run("agent", "run", max_bytes=325).events) == 1


def test_events_larger_than_an_item_are_split_and_reassembled(memory: MemoryStore):
    big = "é" * 400_000
    memory.append_events(
        "agent",
        "run",
        [
            MemoryEvent(PLANNER_NOTE, AT, {"note": "before"}),
            MemoryEvent(TOOL_RESULT, AT, {"tool_call_id": "c", "tool_name": "t", "result_json": f'"{big}"'}),
            MemoryEvent(PLANNER_NOTE, AT, {"note": "after"}),
        ],
    )
    events = memory.load_run("agent", "run").events
    assert events[1].data["result_json"] == f'"{big}"'
    assert [e.data.get("note") for e in events] == ["before", None, "after"]
    assert [e.sequence for e in memory.load_run("agent", "run", after=1, limit=1).events] == [2]


def test_an_append_must_fit_one_transaction(memory: MemoryStore):
    with pytest.raises(PayloadTooLarge, match="one DynamoDB transaction"):
        memory.append_events("agent", "run", [MemoryEvent(PLANNER_NOTE, AT, {"note": "x"})] * 100)
    with pytest.raises(PayloadTooLarge):
        memory.append_events("agent", "run", [MemoryEvent(PLANNER_NOTE, AT, {"note": "x" * 1_500_000})] * 3)
    assert memory.load_run("agent", "run").events == []


def test_writers_with_stale_guesses_still_append_after_the_last_event(client, clock: FakeClock):
    # Two stores stand for two Lambda containers: each guesses from its own last write.
    first, second = (MemoryStore(MemoryTable(client, TABLE), clock) for _ in range(2))
    note = [MemoryEvent(PLANNER_NOTE, AT, {"note": "x"})]
    assert first.append_events("agent", "run", note) == [1]
    assert second.append_events("agent", "run", note * 2) == [2, 3]
    assert first.append_events("agent", "run", note) == [4]
    assert [e.sequence for e in first.load_run("agent", "run").events] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (MemoryEvent("chat_message", AT), 'unknown event type "chat_message"'),
        (MemoryEvent(PLANNER_NOTE, AT, {"note": "x", "extra": 1}), 'planner_note has no field "extra"'),
        (MemoryEvent(PLANNER_NOTE, AT, {}), 'planner_note requires "note"'),
        (MemoryEvent(TOOL_CALL, AT, {"tool_call_id": "c"}), 'tool_call requires "tool_name"'),
        (
            MemoryEvent(TOOL_CALL, AT, {"tool_call_id": "c", "tool_name": "t", "payload": "{"}),
            "payload must be JSON text",
        ),
        (MemoryEvent(THINKING, AT, {"redacted": "***"}), "redacted must be base64 text"),
        (MemoryEvent(THINKING, AT, {"content_index": True}), "content_index must be an integer"),
        (MemoryEvent(USER_MESSAGE, AT, {"message": 5}), "message must be a string"),
        (MemoryEvent(USER_MESSAGE, AT, labels={"role": 1}), "labels must map strings to strings"),
        (MemoryEvent(USER_MESSAGE, datetime(2026, 1, 1)), "timestamp must be a time with a time zone"),
    ],
)
def test_events_that_are_not_goa_ai_shapes_are_refused_and_nothing_is_written(memory: MemoryStore, event, error):
    with pytest.raises(MemoryRequestError, match=error):
        memory.append_events("agent", "run", [EXAMPLES[0], event])
    assert memory.load_run("agent", "run").events == []


@pytest.mark.parametrize(("agent_id", "run_id"), [("a#b", "run"), ("agent", ""), ("agent", "r/1"), ("x" * 257, "r")])
def test_ids_that_could_break_the_key_are_refused(memory: MemoryStore, agent_id: str, run_id: str):
    with pytest.raises(MemoryRequestError, match="must match"):
        memory.append_events(agent_id, run_id, EXAMPLES[:1])
    with pytest.raises(MemoryRequestError, match="must match"):
        memory.load_run(agent_id, run_id)


def test_an_empty_append_is_refused(memory: MemoryStore):
    with pytest.raises(MemoryRequestError, match="must not be empty"):
        memory.append_events("agent", "run", [])
