"""Rebuild a run's transcript from its run log, exactly as it was recorded.

`transcript_messages_seeded` and `transcript_messages_appended` records hold
`model.Message` deltas; concatenated in storage order they are what the
model saw. The readers trust nothing a store returns: a page must make
progress and its cursor must be its last record's id, records must belong
to the run and never repeat. A broken page is a `ContractError`; saved
content that does not decode is a `ContractError` caused by
`InvalidHistoryError`, so callers can tell a bad store from bad history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from cairn.runtime.errors import ContractError, InvalidTranscriptPositionError, is_error
from cairn.runtime.model import (
    EMPTY_SEED_END_ID,
    MAX_TRANSCRIPT_PAGE_RECORDS,
    TRANSCRIPT_TYPES,
    RunMeta,
    RunRecord,
    RunRecordPage,
)
from cairn.runtime.store import RuntimeStore
from cairn.transcript.codec import decode_messages
from cairn.transcript.errors import MessageFormatError, NoTranscriptError, invalid_history
from cairn.transcript.model import Message

PageReader = Callable[[str], RunRecordPage]


def replay_run_log_events(records: Iterable[RunRecord | None]) -> tuple[list[Message], bool]:
    """Messages of the transcript records among `records`, in their order,
    and whether there was any transcript record at all."""
    messages: list[Message] = []
    found = False
    for record in records:
        if record is None or record.type not in TRANSCRIPT_TYPES:
            continue
        messages.extend(decode_record(record))
        found = True
    return messages, found


def decode_record(record: RunRecord) -> list[Message]:
    try:
        return decode_messages(record.payload)
    except MessageFormatError as error:
        raise MessageFormatError(
            f'transcript: decode runlog event "{record.event_key}" for run "{record.run_id}": {error}'
        ) from error


def build_messages_from_run_log(store: RuntimeStore, run_id: str) -> list[Message]:
    """The whole transcript of a run, read once through `list_run_records`.

    A run with neither transcript records nor an (empty) seed has no
    transcript: `NoTranscriptError`.
    """
    if not run_id:
        raise ContractError("transcript: run id is required")
    meta = _replayable_run(store, run_id)
    found = meta.seed_end_id == EMPTY_SEED_END_ID
    messages: list[Message] = []
    pages = _pages(lambda cursor: store.list_run_records(run_id, cursor, MAX_TRANSCRIPT_PAGE_RECORDS))
    for record in _owned_records(pages, meta):
        if record.type in TRANSCRIPT_TYPES:
            messages.extend(_saved_messages(record))
            found = True
    if not found:
        raise NoTranscriptError(f'transcript: runlog for run "{run_id}" has no transcript message events')
    return _still_there(store, run_id, messages)


def build_messages_from_run_log_prefix(store: RuntimeStore, run_id: str, end_id: str) -> list[Message]:
    """The transcript of a run through record `end_id`, via `list_run_transcript_records`.

    Later appends never change the answer. An end position the store
    rejects is invalid saved history (caused by `InvalidTranscriptPositionError`);
    a run-start position yields an empty list.
    """
    if not run_id or not end_id:
        raise ContractError("transcript: store, run id and end record id are required")
    meta = _replayable_run(store, run_id)

    def read(cursor: str) -> RunRecordPage:
        try:
            return store.list_run_transcript_records(run_id, end_id, cursor, MAX_TRANSCRIPT_PAGE_RECORDS)
        except ContractError as error:
            # Only the caller's own end position says something about saved
            # history; a cursor the store handed out failing is the store's fault.
            if not cursor and is_error(error, InvalidTranscriptPositionError):
                raise invalid_history(error) from error
            raise

    messages: list[Message] = []
    for record in _owned_records(_pages(read), meta):
        if record.type not in TRANSCRIPT_TYPES:
            raise _broken(f'invalid transcript record for run "{run_id}"')
        messages.extend(_saved_messages(record))
    return _still_there(store, run_id, messages)


def _replayable_run(store: RuntimeStore, run_id: str) -> RunMeta:
    meta = store.load_run(run_id)
    if meta.seed_end_id not in ("", EMPTY_SEED_END_ID):
        # Seed records live outside the run log and replay does not expand them yet; replaying
        # without them would silently drop the start of the conversation.
        raise _broken(f'run "{run_id}" starts from published seed "{meta.seed_end_id}", which replay does not expand')
    return meta


def _pages(read: PageReader) -> Iterator[RunRecordPage]:
    """Pages until one has no cursor, refusing pages that do not move forward."""
    cursor = ""
    while True:
        page = read(cursor)
        if not page.next_cursor:
            yield page
            return
        if not page.events or page.next_cursor == cursor:
            raise _broken("run page made no forward progress")
        if page.next_cursor != page.events[-1].id:
            raise _broken("run cursor does not identify the last returned record")
        yield page
        cursor = page.next_cursor


def _owned_records(pages: Iterable[RunRecordPage], meta: RunMeta) -> Iterator[RunRecord]:
    """Every record of the pages, each checked to be the run's and new."""
    seen: set[str] = set()
    for page in pages:
        for record in page.events:
            foreign = record.run_id != meta.run_id or not record.id
            if not foreign and record.type in TRANSCRIPT_TYPES:
                foreign = record.agent_id != meta.agent_id or record.session_id != meta.session_id
            if foreign:
                raise _broken(f'invalid transcript record for run "{meta.run_id}"')
            if record.id in seen:
                raise _broken(f'store repeated record "{record.id}"')
            seen.add(record.id)
            yield record


def _saved_messages(record: RunRecord) -> list[Message]:
    try:
        return decode_record(record)
    except MessageFormatError as error:
        raise invalid_history(error) from error


def _still_there(store: RuntimeStore, run_id: str, messages: list[Message]) -> list[Message]:
    # A purge that ran while earlier pages were read must not leave readable history.
    store.load_run(run_id)
    return messages


def _broken(message: str) -> ContractError:
    return ContractError(f"transcript: {message}")
