"""Replaying transcripts from the run log (goa-ai `transcript/runlog_replay_test.go`
and `runlog_prefix_test.go`), on the reference store and on broken stores."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from cairn.runtime.errors import ContractError, InvalidTranscriptPositionError, RunNotFoundError, is_error
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.runtime.model import (
    EMPTY_SEED_END_ID,
    TRANSCRIPT_APPENDED,
    TRANSCRIPT_SEEDED,
    RunMeta,
    RunRecord,
    RunRecordPage,
    RunStart,
)
from cairn.transcript.codec import encode_messages
from cairn.transcript.errors import InvalidHistoryError, MessageFormatError, NoTranscriptError
from cairn.transcript.model import Message, Role, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from cairn.transcript.replay import (
    build_messages_from_run_log,
    build_messages_from_run_log_prefix,
    replay_run_log_events,
)
from tests.contract.builders import T0, complete, declaration, note, publish_literal, root_start, run_start
from tests.support.transcripts import assistant, user


def started_store(**run_changes) -> InMemoryRuntimeStore:
    store = InMemoryRuntimeStore()
    store.create_session("session", T0)
    store.start_root_run(root_start(replace(run_start(), **run_changes)))
    return store


def append_delta(store, key: str, messages: list[Message], type_: str = TRANSCRIPT_APPENDED) -> str:
    return store.append_run_record(note(run_start(), key, body=encode_messages(messages), type_=type_)).id


def test_replay_keeps_canonical_transcript_order_and_exact_numbers():
    store = started_store()
    append_delta(store, "t1", [user("Summarize sales")])
    append_delta(
        store,
        "t2",
        [
            Message(
                role=Role.ASSISTANT,
                parts=[
                    ThinkingPart(text="Need the sales data first.", signature="sig-1", final=True),
                    TextPart(text="Need the sales data first."),
                    ToolUsePart(id="call_1", name="reports.summarize", input={"query": "sales"}),
                ],
            )
        ],
    )
    store.append_run_record(
        note(
            run_start(),
            "t3",
            type_=TRANSCRIPT_APPENDED,
            body=(
                b'[{"role":"user","parts":[{"kind":"tool_result","tool_use_id":"call_1",'
                b'"content":{"rows":3,"status":"ok","total":12345678901234567890.5},"is_error":false}],"meta":null}]'
            ),
        )
    )
    messages = build_messages_from_run_log(store, "run")
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert messages[0].parts == [TextPart(text="Summarize sales")]
    assert [part.kind for part in messages[1].parts] == ["thinking", "text", "tool_use"]
    result = messages[2].parts[0]
    assert result == ToolResultPart(
        tool_use_id="call_1", content={"rows": 3, "status": "ok", "total": result.content["total"]}
    )
    assert result.content["total"].literal == "12345678901234567890.5"


def test_replay_concatenates_seeded_then_appended_messages_and_skips_other_records():
    store = started_store()
    append_delta(store, "seed", [user("hello")], type_=TRANSCRIPT_SEEDED)
    store.append_run_record(note(run_start(), "other"))
    append_delta(store, "reply", [assistant("world")])
    messages = build_messages_from_run_log(store, "run")
    assert [(m.role, m.parts[0].text) for m in messages] == [(Role.USER, "hello"), (Role.ASSISTANT, "world")]


def seeded_store(publish: Callable[[InMemoryRuntimeStore, RunStart], RunStart]) -> InMemoryRuntimeStore:
    """A store whose run "run" starts from the seed `publish` published for it."""
    store = InMemoryRuntimeStore()
    store.create_session("session", T0)
    store.start_root_run(root_start(publish(store, run_start())))
    return store


def publish_empty(store: InMemoryRuntimeStore, run: RunStart) -> RunStart:
    d = declaration(run)
    store.begin_run_seed(d)
    store.publish_run_seed(complete(store, d, EMPTY_SEED_END_ID))
    return replace(run, seed_end_id=EMPTY_SEED_END_ID)


def test_a_published_empty_seed_is_an_empty_history():
    assert build_messages_from_run_log(seeded_store(publish_empty), "run") == []


def test_a_run_without_transcript_records_has_no_transcript():
    with pytest.raises(NoTranscriptError, match='transcript: runlog for run "run" has no transcript message events'):
        build_messages_from_run_log(started_store(), "run")


def test_a_seed_replay_cannot_expand_is_refused_rather_than_skipped():
    store = seeded_store(publish_literal)
    seed_end = store.load_run("run").seed_end_id
    with pytest.raises(ContractError, match=f'starts from published seed "{seed_end}"'):
        build_messages_from_run_log(store, "run")


def test_unknown_runs_and_missing_arguments():
    with pytest.raises(RunNotFoundError):
        build_messages_from_run_log(InMemoryRuntimeStore(), "missing")
    with pytest.raises(ContractError, match="run id is required"):
        build_messages_from_run_log(InMemoryRuntimeStore(), "")
    with pytest.raises(ContractError, match="store, run id and end record id are required"):
        build_messages_from_run_log_prefix(InMemoryRuntimeStore(), "run", "")


def test_replay_run_log_events_reports_whether_any_transcript_record_was_there():
    store = started_store()
    append_delta(store, "a", [user("one"), user("two")])
    records = store.list_run_records("run").events
    messages, found = replay_run_log_events([None, *records])
    assert found and [m.parts[0].text for m in messages] == ["one", "two"]
    assert replay_run_log_events(records[:1]) == ([], False)
    broken = replace(records[-1], payload=b"[{}]")
    with pytest.raises(MessageFormatError, match='decode runlog event "a" for run "run"'):
        replay_run_log_events([broken])


def test_corrupt_saved_content_is_invalid_history():
    store = started_store()
    store.append_run_record(
        note(run_start(), "bad", body=b'[{"role":"user","parts":[{"kind":"video"}]}]', type_=TRANSCRIPT_APPENDED)
    )
    for replay in (
        lambda: build_messages_from_run_log(store, "run"),
        lambda: build_messages_from_run_log_prefix(store, "run", "2"),
    ):
        with pytest.raises(ContractError, match='invalid saved transcript history: .*part kind "video"') as caught:
            replay()
        assert is_error(caught.value, InvalidHistoryError)


def test_prefix_of_a_start_position_is_empty_and_later_writes_are_excluded():
    store = started_store()
    assert build_messages_from_run_log_prefix(store, "run", "1") == []
    end = append_delta(store, "first", [user("first")])
    append_delta(store, "later", [assistant("later")])
    assert [m.parts[0].text for m in build_messages_from_run_log_prefix(store, "run", end)] == ["first"]


def test_prefix_rejects_invalid_positions_as_invalid_history():
    store = started_store()
    with pytest.raises(ContractError) as caught:
        build_messages_from_run_log_prefix(store, "run", "9999")
    assert is_error(caught.value, InvalidHistoryError)
    assert is_error(caught.value, InvalidTranscriptPositionError)


# -- stores that return broken pages ----------------------------------------------------------


def record(record_id: str, run_id: str = "run", type_: str = TRANSCRIPT_SEEDED, payload: bytes = b"[]") -> RunRecord:
    return RunRecord(
        event_key=f"k{record_id}", run_id=run_id, agent_id="", type=type_, payload=payload, timestamp=T0, id=record_id
    )


@dataclass
class PagedStore:
    """A store serving the pages it is given to both listing methods, counting reads."""

    pages: list[RunRecordPage | Exception]
    reads: int = 0
    loads: list[str] = field(default_factory=list)
    vanish_after_loads: int | None = None

    def load_run(self, run_id: str) -> RunMeta:
        self.loads.append(run_id)
        if self.vanish_after_loads is not None and len(self.loads) > self.vanish_after_loads:
            raise RunNotFoundError()
        return RunMeta(
            agent_id="", run_id=run_id, status="running", start_outcome="proceed", started_at=T0, updated_at=T0
        )

    def _next(self) -> RunRecordPage:
        self.reads += 1
        assert self.reads <= 2, "the reader kept reading a broken store"
        page = self.pages[min(self.reads, len(self.pages)) - 1]
        if isinstance(page, Exception):
            raise page
        return page

    def list_run_transcript_records(self, run_id, through_record_id, after_record_id="", limit=512) -> RunRecordPage:
        return self._next()

    def list_run_records(self, run_id, cursor="", limit=100) -> RunRecordPage:
        return self._next()


BROKEN_PAGES = {
    "empty continuation": RunRecordPage(events=[], next_cursor="next"),
    "foreign run": RunRecordPage(events=[record("1", run_id="other")]),
    "malformed payload": RunRecordPage(events=[record("1", payload=b"{")]),
    "non transcript": RunRecordPage(events=[record("1", type_="other")]),
    "repeated page": RunRecordPage(events=[record("1")], next_cursor="1"),
    "cursor is not the last id": RunRecordPage(events=[record("1"), record("2")], next_cursor="1"),
    "missing id": RunRecordPage(events=[record("")]),
}


@pytest.mark.parametrize("name", BROKEN_PAGES)
def test_prefix_refuses_broken_pages_and_only_bad_content_is_invalid_history(name: str):
    with pytest.raises(ContractError) as caught:
        build_messages_from_run_log_prefix(PagedStore([BROKEN_PAGES[name]]), "run", "end")
    assert is_error(caught.value, InvalidHistoryError) == (name == "malformed payload")


@pytest.mark.parametrize("name", sorted(set(BROKEN_PAGES) - {"non transcript"}))
def test_full_replay_refuses_the_same_broken_pages(name: str):
    with pytest.raises(ContractError) as caught:
        build_messages_from_run_log(PagedStore([BROKEN_PAGES[name]]), "run")
    assert is_error(caught.value, InvalidHistoryError) == (name == "malformed payload")


def test_a_failing_cursor_the_store_returned_is_not_invalid_history():
    store = PagedStore(
        [
            RunRecordPage(events=[record("1")], next_cursor="1"),
            ContractError(InvalidTranscriptPositionError()),
        ]
    )
    with pytest.raises(ContractError) as caught:
        build_messages_from_run_log_prefix(store, "run", "end")
    assert is_error(caught.value, InvalidTranscriptPositionError)
    assert not is_error(caught.value, InvalidHistoryError)


def test_a_run_purged_while_it_was_read_yields_no_history():
    store = PagedStore([RunRecordPage(events=[record("1")])], vanish_after_loads=1)
    with pytest.raises(RunNotFoundError):
        build_messages_from_run_log_prefix(store, "run", "end")
    assert store.loads == ["run", "run"]
