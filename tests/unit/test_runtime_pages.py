"""Pages of run records fit a Lambda answer whatever their records hold."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cairn.runtime import wire
from cairn.runtime.errors import ContractError
from cairn.runtime.inmem import InMemoryRuntimeStore
from tests.contract.builders import T0, note, root_start, run_start
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT

PAYLOAD = b'{"text":"' + b"x" * 899_980 + b'"}'  # 900 KB: a page of 100 would be 120 MB in an answer


def read_all(list_page) -> tuple[list[str], list[int]]:
    ids, sizes, cursor = [], [], ""
    while True:
        page = list_page(cursor)
        sizes.append(len(json.dumps({"body": json.dumps(wire.encode(page))})))
        ids += [record.id for record in page.events]
        if not page.next_cursor:
            return ids, sizes
        cursor = page.next_cursor


def store_with_notes(count: int, **note_fields) -> InMemoryRuntimeStore:
    """A session whose run "run" has its start record and `count` notes."""
    store = InMemoryRuntimeStore()
    store.create_session("session", T0)
    run = run_start()
    store.start_root_run(root_start(run))
    for n in range(count):
        store.append_run_record(note(run, f"note-{n}", **note_fields))
    return store


@pytest.mark.parametrize(
    ("count", "fields"),
    [
        (8, {"body": PAYLOAD}),
        # A type of control characters is seven times its length in an answer: 20 of them once made 7.3 MB.
        (20, {"body": b"x", "type_": "\x01" * 50_000}),
    ],
    ids=["payloads", "escaped-types"],
)
def test_record_pages_stop_before_lambda_cannot_carry_them_and_lose_nothing(count: int, fields: dict):
    store = store_with_notes(count, **fields)
    run = run_start()
    by_run = read_all(lambda cursor: store.list_run_records(run.run_id, cursor, 100))
    by_session = read_all(lambda cursor: store.list_session_run_records("session", cursor, 100))
    for ids, sizes in (by_run, by_session):
        assert ids == [str(n) for n in range(1, count + 2)], "every record once, in order"
        assert len(sizes) > 1 and max(sizes) < LAMBDA_ANSWER_LIMIT


def test_small_records_still_fill_the_page_the_caller_asked_for():
    page = store_with_notes(5).list_run_records(run_start().run_id, "", 4)
    assert [record.id for record in page.events] == ["1", "2", "3", "4"] and page.next_cursor == "4"


def test_transcript_pages_count_texts_as_lambda_escapes_them():
    """goa-ai's rule counts payloads alone: turn ids of control characters made every page of the run's
    transcript larger than an answer can carry."""
    store = store_with_notes(0)
    run = run_start()
    for n in range(4):
        transcript = replace(note(run, f"t-{n}", type_="transcript_messages_appended"), turn_id="\x01" * 300_000)
        store.append_run_record(transcript)
    by_transcript = read_all(lambda cursor: store.list_run_transcript_records(run.run_id, "5", cursor, 512))
    ids, sizes = by_transcript
    assert ids == ["2", "3", "4", "5"], "every transcript record once, in order"
    assert len(sizes) > 1 and max(sizes) < LAMBDA_ANSWER_LIMIT


@pytest.mark.parametrize("cursor", ["1" * 5000, "9" * 20])
def test_cursors_and_positions_too_long_for_a_sequence_are_refused(cursor: str):
    """`int` refuses text of over 4,300 digits: these were 500s."""
    store = store_with_notes(1)
    run = run_start()
    with pytest.raises(ContractError):
        store.list_run_records(run.run_id, cursor, 10)
    with pytest.raises(ContractError):
        store.list_session_run_records("session", cursor, 10)
