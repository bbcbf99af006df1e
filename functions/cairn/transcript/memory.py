"""Product memory: the product's own record of each agent run (goa-ai's `memory.Store`).

It is not the runtime store. The runtime store keeps what the runtime needs
to run and resume; product memory keeps what the product shows, searches
and deletes: user and assistant messages, tool calls and results, planner
notes and reasoning, as ordered events per (agent, run). Event data uses
goa-ai's keys for each type, numbers kept exact; events are ordered by the
sequence the store assigns when it commits them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from cairn.clock import Clock, system_clock
from cairn.transcript import exactjson
from cairn.transcript.errors import MemoryRequestError

USER_MESSAGE = "user_message"
ASSISTANT_MESSAGE = "assistant_message"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
PLANNER_NOTE = "planner_note"
THINKING = "thinking"

# An append is one atomic write: the run's head and one item per event (more for large data).
MAX_EVENTS_PER_APPEND = 99

# Ids become part of a DynamoDB key where `#` separates them.
ID_PATTERN = re.compile(r"[A-Za-z0-9._:@-]{1,256}")


@dataclass(frozen=True)
class MemoryEvent:
    """One event of a run's memory. The store assigns `sequence` (from 1),
    keeps `timestamp` to the millisecond and, when it is None, sets it to
    the time of the append."""

    type: str
    timestamp: datetime | None = None
    data: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    sequence: int = 0

    @property
    def stored_at(self) -> datetime:
        """The time of an event the store has taken, which always has one."""
        if self.timestamp is None:
            raise ValueError("a memory event the store has taken carries its time")
        return self.timestamp


@dataclass(frozen=True)
class MemoryPage:
    events: list[MemoryEvent]
    has_more: bool = False


@dataclass(frozen=True)
class MemorySnapshot:
    """A run's events in order; `meta` holds the paging position (`next_cursor`, `has_more`)."""

    agent_id: str
    run_id: str
    events: list[MemoryEvent]
    meta: dict[str, Any]


class EventLog(Protocol):
    """Where memory events are kept (`cairn.dynamodb.memory_table.MemoryTable` on DynamoDB)."""

    def append(self, agent_id: str, run_id: str, events: Sequence[MemoryEvent]) -> list[int]:
        """Commit the events atomically after the run's last one; their sequences."""

    def list_events(
        self, agent_id: str, run_id: str, *, after: int, limit: int | None, max_bytes: int | None
    ) -> MemoryPage: ...


@dataclass(frozen=True)
class _Field:
    accepts: Callable[[Any], bool]
    expected: str


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_json_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        exactjson.loads(value)
    except exactjson.JsonError:
        return False
    return True


def _is_base64(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        exactjson.b64decode(value)
    except exactjson.JsonError:
        return False
    return True


_TEXT = _Field(lambda value: isinstance(value, str), "a string")
_INTEGER = _Field(_is_int, "an integer")
_FLAG = _Field(lambda value: isinstance(value, bool), "true or false")
_ANY = _Field(lambda value: True, "any JSON value")
_OBJECT = _Field(lambda value: isinstance(value, dict), "an object")
_JSON_TEXT = _Field(_is_json_text, "JSON text")
_BASE64 = _Field(_is_base64, "base64 text")

_MESSAGE = {"message": _TEXT, "structured": _ANY}
_TOOL = {"tool_call_id": _TEXT, "parent_tool_call_id": _TEXT, "tool_name": _TEXT}

# goa-ai's typed payloads (`memory/event_data.go`), key for key.
EVENT_FIELDS: dict[str, dict[str, _Field]] = {
    USER_MESSAGE: _MESSAGE,
    ASSISTANT_MESSAGE: _MESSAGE,
    TOOL_CALL: {**_TOOL, "payload": _JSON_TEXT, "queue": _TEXT, "expected_children_total": _INTEGER},
    TOOL_RESULT: {
        **_TOOL,
        "result_json": _JSON_TEXT,
        "preview": _TEXT,
        "bounds": _OBJECT,
        "duration": _INTEGER,
        "error_message": _TEXT,
    },
    PLANNER_NOTE: {"note": _TEXT},
    THINKING: {"text": _TEXT, "signature": _TEXT, "redacted": _BASE64, "content_index": _INTEGER, "final": _FLAG},
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    TOOL_CALL: ("tool_call_id", "tool_name"),
    TOOL_RESULT: ("tool_call_id", "tool_name"),
    PLANNER_NOTE: ("note",),
}


def check_id(name: str, value: str) -> None:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise MemoryRequestError(f"{name} must match {ID_PATTERN.pattern}")


def check_event(event: MemoryEvent, where: str = "event") -> None:
    """An event of a known type whose data has only its type's keys, each of the right kind."""
    fields = EVENT_FIELDS.get(event.type)
    if fields is None:
        known = ", ".join(EVENT_FIELDS)
        raise MemoryRequestError(f'{where}: unknown event type "{event.type}", expected one of {known}')
    if event.timestamp is not None and (not isinstance(event.timestamp, datetime) or event.timestamp.tzinfo is None):
        raise MemoryRequestError(f"{where}.timestamp must be a time with a time zone")
    if not isinstance(event.labels, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in event.labels.items()
    ):
        raise MemoryRequestError(f"{where}.labels must map strings to strings")
    if not isinstance(event.data, dict):
        raise MemoryRequestError(f"{where}.data must be an object")
    for name, value in event.data.items():
        spec = fields.get(name)
        if spec is None:
            raise MemoryRequestError(f'{where}.data: {event.type} has no field "{name}"')
        if not spec.accepts(value):
            raise MemoryRequestError(f"{where}.data.{name} must be {spec.expected}")
    for name in REQUIRED_FIELDS.get(event.type, ()):
        if not event.data.get(name):
            raise MemoryRequestError(f'{where}.data: {event.type} requires "{name}"')


def to_millisecond(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class MemoryStore:
    """goa-ai's `memory.Store`: append a run's events, load them back in order."""

    def __init__(self, log: EventLog, clock: Clock = system_clock) -> None:
        self._log = log
        self._clock = clock

    def append_events(self, agent_id: str, run_id: str, events: Sequence[MemoryEvent]) -> list[int]:
        """Append all `events` or none, in order; returns their sequences.

        Concurrent appends to one run interleave whole batches and never
        lose or reorder an event.
        """
        check_id("agent_id", agent_id)
        check_id("run_id", run_id)
        if not events:
            raise MemoryRequestError("events must not be empty")
        for index, event in enumerate(events):
            check_event(event, f"events[{index}]")
        now = datetime.fromtimestamp(self._clock(), UTC)
        timed = [event if event.timestamp is not None else replace(event, timestamp=now) for event in events]
        return self._log.append(agent_id, run_id, timed)

    def load_run(
        self,
        agent_id: str,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> MemorySnapshot:
        """The run's events after sequence `after`, oldest first.

        Without limits that is the whole run; an unknown run is an empty
        snapshot, not an error. `max_bytes` bounds the data of a page (one
        event always fits), so a page can be sent in one HTTP response.
        """
        check_id("agent_id", agent_id)
        check_id("run_id", run_id)
        page = self._log.list_events(agent_id, run_id, after=after, limit=limit, max_bytes=max_bytes)
        next_cursor = page.events[-1].sequence if page.events else after
        return MemorySnapshot(
            agent_id=agent_id,
            run_id=run_id,
            events=page.events,
            meta={"next_cursor": next_cursor, "has_more": page.has_more},
        )
