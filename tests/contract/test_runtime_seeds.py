"""Initial history ("seeds") and preparations, run against every implementation.

Cases port goa-ai's `storage/inmem` seed tests (seed_test.go, seed_literal_test.go,
seed_chain_test.go); each names its original. Where goa-ai starts a run "before
publication" with the start's zero seed position, these use "0": an empty
`seed_end_id` is Cairn's "no initial history", which never consults seeds.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from cairn.jsontext import MAX_DEPTH
from cairn.runtime.errors import (
    ContractError,
    InvalidTranscriptPositionError,
    PreparationAbandonedError,
    RunConflictError,
    RunNotFoundError,
    RunRecordOwnerMismatchError,
    SeedConflictError,
    SeedNotFoundError,
    SessionPurgedError,
    is_error,
)
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.runtime.model import (
    EMPTY_SEED_END_ID,
    MAX_RECORD_PAGE_BYTES,
    MAX_SEED_COMMAND_BYTES,
    HistoryPrefix,
    LiteralPart,
    PreparationAttempt,
    RunStatus,
    SeedKind,
    SeedPublication,
)
from cairn.runtime.seed_checks import answered_bytes as seed_answered_bytes
from cairn.runtime.seed_checks import go_append, go_record
from tests.contract.builders import (
    LITERAL,
    PREPARED,
    T0,
    child_start,
    complete,
    declaration,
    one_shot_child_start,
    one_shot_start,
    operation,
    publish_literal,
    root_start,
    run_start,
    seed_append,
    suspension,
    terminal,
)
from tests.contract.checks import raises, records_of


def started_root(store, run_id: str = "run"):
    """goa-ai's `startSeedTestRun`: publish an empty literal seed, then start the root run attaching it."""
    run = run_start(run_id)
    d = declaration(run)
    store.begin_run_seed(d)
    store.publish_run_seed(complete(store, d, EMPTY_SEED_END_ID))
    run = replace(run, seed_end_id=EMPTY_SEED_END_ID)
    store.start_root_run(root_start(run))
    return run


def test_seed_publication_and_exact_retry(store, session):
    """TestSeedPublicationAndExactRetry"""
    run = run_start()
    d = declaration(run)
    first = store.begin_run_seed(d)
    assert first.end_id == EMPTY_SEED_END_ID and first.source is None
    raises(RunNotFoundError, store.load_run, run.run_id)
    raises(SeedNotFoundError, store.load_run_seed, run.run_id, first.end_id)
    raises(SeedNotFoundError, store.start_root_run, root_start(replace(run, seed_end_id=EMPTY_SEED_END_ID)))

    command = seed_append(d, "first", first.end_id, messages=LITERAL)
    end = store.append_run_seed(command)
    assert store.append_run_seed(command) == end
    wrong = SeedPublication(
        run_id=run.run_id, attempt_id=d.attempt_id, seed_end_id=first.end_id, end_id=end, prepared_bytes=2
    )
    raises(SeedConflictError, store.publish_run_seed, wrong)
    publication = complete(store, d, end)
    store.publish_run_seed(publication)
    store.publish_run_seed(publication)
    assert store.append_run_seed(command) == end
    raises(SeedConflictError, store.append_run_seed, seed_append(d, "other", end, messages=LITERAL))

    seeded = replace(run, seed_end_id=end)
    result = store.start_root_run(root_start(seeded))
    assert len(records_of(store, run.run_id)) == 1, "the start attaches the seed without copying messages"
    assert store.load_run(run.run_id).seed_end_id == end
    page = store.list_run_seed_records(run.run_id, end, "", 10)
    assert [record.messages for record in page.records] == [LITERAL] and page.next_cursor == ""
    assert store.load_run_seed(run.run_id, end).declaration == d
    again = store.start_root_run(root_start(seeded))
    assert again.started.id == result.started.id and not again.started.inserted


@pytest.mark.parametrize("publish", [False, True])
def test_seed_purge_removes_unstarted_publication(store, session, publish):
    """TestSeedPurgeRemovesUnstartedPublication"""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    if publish:
        store.publish_run_seed(complete(store, d, EMPTY_SEED_END_ID))
    store.end_session(session, T0)
    store.purge_session(session)
    raises(SeedNotFoundError, store.append_run_seed, seed_append(d, "late", EMPTY_SEED_END_ID, messages=LITERAL))
    raises(SessionPurgedError, store.begin_run_seed, d)
    raises(SessionPurgedError, store.start_root_run, root_start(replace(run, seed_end_id=EMPTY_SEED_END_ID)))
    raises(SeedNotFoundError, store.load_run_seed, run.run_id, EMPTY_SEED_END_ID)


def test_seed_captured_source_and_single_reference(store, session):
    """TestSeedCapturedSourceAndSingleReference"""
    source = started_root(store)
    finished = store.record_run_terminal(terminal(source))
    d = replace(
        declaration(run_start("next")), kind=SeedKind.NEXT_TURN, source_run_id=source.run_id, exclude_reasoning=True
    )
    seed = store.begin_run_seed(d)
    assert seed.source == HistoryPrefix(
        run_id=source.run_id, end_id=finished.id, exclude_system=True, exclude_reasoning=True
    )
    unsourced = SeedPublication(
        run_id=d.run_id, attempt_id=d.attempt_id, seed_end_id=seed.end_id, end_id=seed.end_id, prepared_bytes=2
    )
    raises(SeedConflictError, store.publish_run_seed, unsourced)
    end = store.append_run_seed(seed_append(d, "source", seed.end_id, prefix=seed.source))
    raises(SeedConflictError, store.append_run_seed, seed_append(d, "duplicate", end, prefix=seed.source))
    store.publish_run_seed(complete(store, d, end))
    raises(SeedConflictError, store.begin_run_seed, replace(d, exclude_reasoning=False))
    assert store.begin_run_seed(d) == replace(seed, end_id=end)


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.SUSPENDED, RunStatus.FAILED, RunStatus.CANCELED])
def test_seed_rejects_unusable_sources(store, session, status):
    """TestSeedRejectsUnusableSources"""
    source = started_root(store)
    if status == RunStatus.SUSPENDED:
        store.record_run_suspension(suspension(source))
    elif status != RunStatus.RUNNING:
        store.record_run_terminal(terminal(source, status))
    d = replace(declaration(run_start("next")), kind=SeedKind.NEXT_TURN, source_run_id=source.run_id)
    raises(ContractError, store.begin_run_seed, d, match=f'has status "{status}", want "completed"')
    raises(SeedNotFoundError, store.append_run_seed, seed_append(d, "first", EMPTY_SEED_END_ID, messages=LITERAL))


def test_seed_sources_must_belong_to_the_declared_owner(store, session):
    """seedSourceLocked: a source of another agent, or one that does not exist, is refused."""
    source = started_root(store)
    store.record_run_terminal(terminal(source))
    d = replace(
        declaration(run_start("next", agent="other-agent")), kind=SeedKind.NEXT_TURN, source_run_id=source.run_id
    )
    raises(RunRecordOwnerMismatchError, store.begin_run_seed, d)
    raises(RunNotFoundError, store.begin_run_seed, replace(d, agent_id="agent", source_run_id="missing"))
    continuation = replace(d, agent_id="agent", kind=SeedKind.CONTINUATION, source_end_id="99")
    suspended = started_root(store, "paused")
    store.record_run_suspension(suspension(suspended))
    raises(InvalidTranscriptPositionError, store.begin_run_seed, replace(continuation, source_run_id="paused"))


def test_seed_literal_closure_and_exact_retry(store, session):
    """TestSeedLiteralClosureAndExactRetry"""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    first = seed_append(d, "first", EMPTY_SEED_END_ID, literal_part=LiteralPart(b'[{"role":"user",', False))
    end = store.append_run_seed(first)
    assert store.append_run_seed(first) == end
    closed = replace(first, record=replace(first.record, literal_part=LiteralPart(b'[{"role":"user",', True)))
    raises(SeedConflictError, store.append_run_seed, closed)
    changed = replace(first, record=replace(first.record, literal_part=LiteralPart(b'{{"role":"user",', False)))
    raises(SeedConflictError, store.append_run_seed, changed)
    for variant in ({"messages": b"[]"}, {"prefix": HistoryPrefix("source", "1")}, {"prepared": b"{}"}):
        raises(SeedConflictError, store.append_run_seed, seed_append(d, "interleaved", end, **variant))
    raises(
        SeedConflictError,
        store.publish_run_seed,
        SeedPublication(run_id=d.run_id, attempt_id=d.attempt_id, seed_end_id=end, end_id=end, prepared_bytes=1),
    )
    assert store.find_run_preparation(operation(d)) is None
    last = seed_append(d, "last", end, literal_part=LiteralPart(b'"parts":[{"kind":"text","text":"exact"}]}]', True))
    raises(SeedConflictError, store.append_run_seed, replace(last, record=replace(last.record, previous_id="0")))
    final = store.append_run_seed(last)
    publication = complete(store, d, final)
    late = replace(last, record=replace(last.record, key="late-literal", previous_id=publication.end_id))
    raises(SeedConflictError, store.append_run_seed, late)
    store.publish_run_seed(publication)
    accepted = store.settle_run_preparation(PreparationAttempt(operation(d), d.attempt_id))
    assert accepted is not None
    assert accepted.seed.end_id == final and accepted.end_id == publication.end_id
    assert accepted.prepared_bytes == len(PREPARED)
    assert store.find_run_preparation(operation(d)) == accepted
    assert store.append_run_seed(first) == end
    assert store.append_run_seed(last) == final
    page = store.list_run_seed_records(d.run_id, final, "", 1)
    assert page.records[0].literal_part == first.record.literal_part and page.next_cursor == end
    rest = store.list_run_seed_records(d.run_id, final, page.next_cursor, 1)
    assert b"".join(r.literal_part.data for r in page.records + rest.records) == (
        b'[{"role":"user","parts":[{"kind":"text","text":"exact"}]}]'
    )
    compiled = store.list_run_preparation_records(d.run_id, publication.end_id, "", 10)
    assert [record.prepared for record in compiled.records] == [PREPARED]
    store.start_root_run(root_start(replace(run, seed_end_id=final)))


@pytest.mark.parametrize("operation_kind", ["settle", "purge"])
def test_seed_literal_settlement_and_purge(store, session, operation_kind):
    """TestSeedLiteralSettlementAndPurge"""
    d = declaration(run_start())
    store.begin_run_seed(d)
    end = store.append_run_seed(seed_append(d, "first", EMPTY_SEED_END_ID, literal_part=LiteralPart(b"[", False)))
    append_error, begin_error = PreparationAbandonedError, PreparationAbandonedError
    if operation_kind == "settle":
        assert store.settle_run_preparation(PreparationAttempt(operation(d), d.attempt_id)) is None
    else:
        store.end_session(session, T0)
        store.purge_session(session)
        append_error, begin_error = SeedNotFoundError, SessionPurgedError
    last = seed_append(d, "last", end, literal_part=LiteralPart(b'{"role":"user"}]', True))
    raises(append_error, store.append_run_seed, last)
    raises(begin_error, store.begin_run_seed, d)
    raises(ContractError, store.load_run_seed, d.run_id, end)


def test_settlement_before_begin_abandons_the_attempt(store, session):
    """SettleRunPreparation records a missing attempt as abandoned: a late first begin cannot reopen it."""
    d = declaration(run_start())
    assert store.settle_run_preparation(PreparationAttempt(operation(d), d.attempt_id)) is None
    raises(PreparationAbandonedError, store.begin_run_seed, d)
    other = replace(d, attempt_id="second")
    store.begin_run_seed(other)
    store.publish_run_seed(complete(store, other, EMPTY_SEED_END_ID))
    raises(
        PreparationAbandonedError,
        store.publish_run_seed,
        SeedPublication(run_id=d.run_id, attempt_id=d.attempt_id, seed_end_id="0", end_id="1", prepared_bytes=2),
    )
    accepted = store.settle_run_preparation(PreparationAttempt(operation(d), "third"))
    assert accepted is not None and accepted.seed.declaration == other
    raises(SeedConflictError, store.begin_run_seed, replace(d, command_id="another command"))
    raises(SeedConflictError, store.find_run_preparation, replace(operation(d), command_id="another command"))
    raises(SeedConflictError, store.begin_run_seed, replace(d, attempt_id="fourth"))


def test_seed_literal_across_real_pages(store, session):
    """TestSeedLiteralReaderAcrossRealPages (the store's part: parts split inside a character, read a page each)"""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    data = '[{"role":"user","parts":[{"kind":"text","text":"before 雪 after"}]}]'.encode()
    split = data.index("雪".encode()) + 1
    end = EMPTY_SEED_END_ID
    for index, part in enumerate((data[:split], data[split:])):
        end = store.append_run_seed(seed_append(d, str(index), end, literal_part=LiteralPart(part, index == 1)))
    store.publish_run_seed(complete(store, d, end))
    store.start_root_run(root_start(replace(run, seed_end_id=end)))
    pages, cursor, parts = 0, "", []
    while True:
        page = store.list_run_seed_records(run.run_id, end, cursor, 1)
        pages += 1
        parts += [record.literal_part for record in page.records]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert pages == 2 and b"".join(part.data for part in parts) == data and parts[-1].final
    assert store.load_run(run.run_id).status == RunStatus.RUNNING


def test_seed_pages_hold_at_most_512_records_and_check_cursors(store, session):
    """ListRunSeedRecords: at most 512 records a page; cursors canonical and strictly inside the range."""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    end = EMPTY_SEED_END_ID
    for index in range(513):
        end = store.append_run_seed(seed_append(d, f"m{index}", end, messages=b"[]"))
    store.publish_run_seed(complete(store, d, end))
    first = store.list_run_seed_records(run.run_id, end, "", 10_000)
    assert len(first.records) == 512 and first.next_cursor == "512"
    second = store.list_run_seed_records(run.run_id, end, first.next_cursor, 10_000)
    assert [record.id for record in second.records] == ["513"] and second.next_cursor == ""
    for cursor in ("0", "0512", "514", "x", "-1"):
        raises(InvalidTranscriptPositionError, store.list_run_seed_records, run.run_id, end, cursor, 10)
    raises(InvalidTranscriptPositionError, store.list_run_seed_records, run.run_id, end, "", 0)
    raises(SeedConflictError, store.list_run_seed_records, run.run_id, "512", "", 10)
    compiled = store.list_run_preparation_records(run.run_id, "514", "", 10)
    assert [record.id for record in compiled.records] == ["514"]
    raises(InvalidTranscriptPositionError, store.list_run_preparation_records, run.run_id, "514", "513", 10)
    raises(SeedConflictError, store.list_run_preparation_records, run.run_id, "513", "", 10)


def test_literals_padded_with_whitespace_are_bounded_as_sent_and_page_within_an_answer(store, session):
    """Go compacts a literal, but it is kept and answered as sent: literals of spaces once made every page of
    the seed larger than an answer can carry, and a 2.5 MB one was accepted."""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    raises(ContractError, store.append_run_seed, seed_append(d, "huge", EMPTY_SEED_END_ID, messages=padded(2_500_000)))
    end = EMPTY_SEED_END_ID
    for index in range(4):
        end = store.append_run_seed(seed_append(d, f"m{index}", end, messages=padded(999_000)))
    store.publish_run_seed(complete(store, d, end))
    pages, cursor, seen = 0, "", []
    while True:
        page = store.list_run_seed_records(run.run_id, end, cursor, 512)
        answered = sum(seed_answered_bytes(record, len(go_record(record))) for record in page.records)
        assert answered <= MAX_RECORD_PAGE_BYTES or len(page.records) == 1
        seen += [record.key for record in page.records]
        pages += 1
        if not (cursor := page.next_cursor):
            break
    assert seen == [f"m{index}" for index in range(4)] and pages > 1


def padded(size: int) -> bytes:
    return b"[" + b" " * (size - 2) + b"]"


def literal_of_command_size(d, size: int) -> bytes:
    """A JSON string literal whose append command encodes, as Go does, to exactly `size` bytes."""
    frame = len(go_append(seed_append(d, "big", EMPTY_SEED_END_ID, messages=b'""')))
    return b'"' + b"a" * (size - frame) + b'"'


def test_seed_commands_up_to_the_limit_round_trip_exactly(store, session):
    """MaxSeedCommandBytes: a 1,000,000-byte command is accepted and read back byte for byte; one more is not."""
    run = run_start()
    d = declaration(run)
    store.begin_run_seed(d)
    too_big = literal_of_command_size(d, MAX_SEED_COMMAND_BYTES + 1)
    raises(
        ContractError,
        store.append_run_seed,
        seed_append(d, "big", EMPTY_SEED_END_ID, messages=too_big),
        match="seed command size 1000001 exceeds 1000000 bytes",
    )
    exact = literal_of_command_size(d, MAX_SEED_COMMAND_BYTES)
    end = store.append_run_seed(seed_append(d, "big", EMPTY_SEED_END_ID, messages=exact))
    store.publish_run_seed(complete(store, d, end))
    page = store.list_run_seed_records(run.run_id, end, "", 10)
    assert page.records[0].messages == exact


def test_seed_commands_are_validated(store, session):
    """ValidateSeedDeclaration and ValidateSeedAppend, before anything is read."""
    d = declaration(run_start())
    for change, message in (
        ({"command_id": ""}, "preparation agent, run, command and attempt IDs are required"),
        ({"source_run_id": "x"}, "literal seed cannot declare a source or source transform"),
        ({"kind": SeedKind.NEXT_TURN}, "referenced history requires a session and a distinct source run"),
        (
            {"kind": SeedKind.NEXT_TURN, "source_run_id": "x", "source_end_id": "1"},
            "completed source position is assigned by the store",
        ),
        (
            {"kind": SeedKind.CONTINUATION, "source_run_id": "x"},
            "continuation requires its exact saved position and preserves reasoning",
        ),
    ):
        raises(ContractError, store.begin_run_seed, replace(d, **change), match=message)
    store.begin_run_seed(d)
    for variant, message in (
        ({}, "requires exactly one complete literal"),
        ({"messages": b"[]", "prepared": b"{}"}, "requires exactly one complete literal"),
        ({"messages": b"[nope"}, "seed literal is not valid JSON"),
        # Deeper than `jsontext.MAX_DEPTH`: refused before Python's decoder would recurse once per level.
        ({"messages": b"[" * 1000}, "seed literal is not valid JSON"),
        ({"messages": b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)}, "seed literal is not valid JSON"),
        ({"messages": b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"x"}, "seed literal is not valid JSON"),
        ({"literal_part": LiteralPart(b"", True)}, "literal part requires nonempty data"),
    ):
        raises(ContractError, store.append_run_seed, seed_append(d, "k", EMPTY_SEED_END_ID, **variant), match=message)
    raises(
        ContractError,
        store.append_run_seed,
        seed_append(d, "", EMPTY_SEED_END_ID, messages=b"[]"),
        match="preparation append requires run, attempt, key and previous position",
    )


def test_starts_attach_exactly_the_published_seed(store, session):
    """validateStartSeedLocked: the published seed, at its end, of the start's agent and session."""
    run = publish_literal(store, run_start())
    raises(SeedConflictError, store.start_root_run, root_start(replace(run, seed_end_id="99")))
    raises(SeedNotFoundError, store.start_root_run, root_start(replace(run, run_id="other")))
    store.create_session("elsewhere", T0)
    moved = replace(run, session_id="elsewhere")
    raises(RunRecordOwnerMismatchError, store.start_root_run, root_start(moved))
    raises(RunNotFoundError, store.load_run, run.run_id)
    store.start_root_run(root_start(run))
    child = child_start()
    child_run = publish_literal(store, child.run)
    store.start_child_run(replace(child, run=child_run))
    raises(
        SeedNotFoundError,
        store.start_child_run,
        replace(child_start("child-2"), run=replace(child_start("child-2").run, seed_end_id="0")),
    )
    solo = publish_literal(store, one_shot_start().run)
    store.start_one_shot_run(replace(one_shot_start(), run=solo))
    solo_child = publish_literal(store, one_shot_child_start().run)
    store.start_one_shot_child_run(replace(one_shot_child_start(), run=solo_child))


def test_continuation_seed_names_the_predecessor(store, session):
    """Seed kind `continuation` iff the start has a predecessor, and its source is that predecessor."""
    first = started_root(store, "first")
    store.record_run_suspension(suspension(first))
    successor = run_start("second", predecessor="first")
    literal = publish_literal(store, successor)
    raises(SeedConflictError, store.start_root_run, root_start(literal))
    plain = run_start("third")
    d = replace(declaration(plain), kind=SeedKind.CONTINUATION, source_run_id="first", source_end_id="2")
    store.begin_run_seed(d)
    end = store.append_run_seed(seed_append(d, "source", EMPTY_SEED_END_ID, prefix=HistoryPrefix("first", "2")))
    store.publish_run_seed(complete(store, d, end))
    raises(SeedConflictError, store.start_root_run, root_start(replace(plain, seed_end_id=end)))
    continued = replace(plain, predecessor_run_id="first", seed_end_id=end)
    result = store.start_root_run(root_start(continued))
    assert result.started.inserted and store.load_run("first").successor_run_id == "third"


def test_closed_start_retry_checks_the_seed(store, session):
    """TestClosedRequestRequiresExactPublishedHistory, the change a caller can make: another seed position."""
    run = publish_literal(store, run_start())
    command = root_start(run)
    store.start_root_run(command)
    store.record_run_terminal(terminal(run))
    before = records_of(store, run.run_id)
    later = replace(run, started_at=run.started_at + timedelta(hours=1))
    assert store.start_root_run(root_start(later)).run_status == RunStatus.COMPLETED
    raises(SeedConflictError, store.start_root_run, root_start(replace(later, seed_end_id="99")))
    assert records_of(store, run.run_id) == before


def test_begin_refuses_a_started_run(store, running):
    """BeginRunSeed on a run id already started is a run conflict; it reserves nothing."""
    d = declaration(running.run)
    raises(RunConflictError, store.begin_run_seed, d)
    raises(SeedNotFoundError, store.append_run_seed, seed_append(d, "first", EMPTY_SEED_END_ID, messages=LITERAL))


def test_seed_chain_linear_history_and_composed_reasoning(store, session):
    """TestSeedChainLinearHistoryAndComposedReasoning: chained turns, each history a reference to the last.

    Reading the newest turn's whole history takes one seed page and one run-record
    page per turn: the cost follows the pages, not copies of the chain. goa-ai's
    300 turns run in memory; the durable stores, where each turn is six round
    trips, chain 40 to show the same linear count.
    """
    turns = 300 if isinstance(store, InMemoryRuntimeStore) else 40
    previous = started_root(store, "turn-0")
    store.record_run_terminal(terminal(previous))
    for turn in range(1, turns):
        run = run_start(f"turn-{turn}")
        d = replace(
            declaration(run), kind=SeedKind.NEXT_TURN, source_run_id=previous.run_id, exclude_reasoning=turn == 2
        )
        seed = store.begin_run_seed(d)
        end = store.append_run_seed(seed_append(d, "source", seed.end_id, prefix=seed.source))
        store.publish_run_seed(complete(store, d, end))
        previous = replace(run, seed_end_id=end)
        store.start_root_run(root_start(previous))
        store.record_run_terminal(terminal(previous))
    seed_pages = log_pages = 0
    run_id, end_id, excluded = previous.run_id, previous.seed_end_id, []
    while run_id != "turn-0":
        page = store.list_run_seed_records(run_id, end_id, "", 512)
        seed_pages += 1
        (reference,) = [record.prefix for record in page.records if record.prefix is not None]
        excluded.append(reference.exclude_reasoning)
        log = store.list_run_records(reference.run_id, "", 512)
        log_pages += 1
        assert log.events[-1].id == reference.end_id
        run_id = reference.run_id
        end_id = store.load_run(run_id).seed_end_id
    assert seed_pages == log_pages == turns - 1
    assert excluded.count(True) == 1 and excluded[-2] is True


def race(*calls) -> list:
    """Run `calls` at once; each one's result or the exception it raised, in order."""
    release = threading.Barrier(len(calls))
    outcomes: list = [None] * len(calls)

    def run(index: int) -> None:
        release.wait()
        try:
            outcomes[index] = calls[index]()
        except Exception as error:  # the caller asserts which answers are allowed
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_publication_and_settlement_decide_once(store, session, attempt):
    """Settlement and publication share one decision: the attempt is published and settlement returns it,
    or settlement abandons it and publication is refused."""
    d = declaration(run_start())
    store.begin_run_seed(d)
    publication = complete(store, d, EMPTY_SEED_END_ID)
    published, settled = race(
        lambda: store.publish_run_seed(publication),
        lambda: store.settle_run_preparation(PreparationAttempt(operation(d), d.attempt_id)),
    )
    if settled is None:
        assert is_error(published, PreparationAbandonedError), published
        raises(SeedNotFoundError, store.load_run_seed, d.run_id, EMPTY_SEED_END_ID)
    else:
        assert published is None, published
        assert settled.end_id == publication.end_id
        assert store.load_run_seed(d.run_id, EMPTY_SEED_END_ID).declaration == d


def test_two_attempts_racing_to_publish_leave_one_winner(store, session):
    """Two uploads of one operation publish at once: exactly one is accepted, the other conflicts."""
    run = run_start()
    attempts = [declaration(run, attempt=name) for name in ("first", "second")]
    publications = []
    for d in attempts:
        store.begin_run_seed(d)
        publications.append(complete(store, d, EMPTY_SEED_END_ID))
    outcomes = race(*(lambda p=p: store.publish_run_seed(p) for p in publications))
    winners = [index for index, outcome in enumerate(outcomes) if outcome is None]
    assert len(winners) == 1, outcomes
    assert all(is_error(outcome, SeedConflictError) for outcome in outcomes if outcome is not None)
    accepted = store.find_run_preparation(operation(attempts[0]))
    assert accepted is not None and accepted.seed.declaration == attempts[winners[0]]
