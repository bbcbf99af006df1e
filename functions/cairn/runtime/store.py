"""`RuntimeStore`: goa-ai's `storage.Store` contract and host session
administration, served by the rule engine over any `Backend`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from cairn.decimal_text import parse_decimal
from cairn.runtime import engine, model, seed_checks, seed_rules
from cairn.runtime.backend import Backend, Reads
from cairn.runtime.errors import (
    ContractError,
    InvalidTranscriptPositionError,
    RunNotFoundError,
    RunSuspensionNotFoundError,
    RuntimeStoreError,
    RuntimeStoreUnavailable,
    SessionNotFoundError,
    SessionPurgedError,
    wrap,
)
from cairn.runtime.state import SeedAttempt, SessionState, UnitOfWork

T = TypeVar("T")


def utc_now() -> datetime:
    """Now, at the millisecond precision the contract stores."""
    moment = datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class RuntimeStore(Protocol):
    """The methods of goa-ai's `storage.Store` in scope, plus session administration.

    Every store raises the same exceptions (`cairn.runtime.errors`): a
    mutation refused by the contract is a `ContractError`; a store it cannot
    reach is `RuntimeStoreUnavailable`. `cairn.runtime.methods` lists the
    methods again as HTTP operations, one row each.
    """

    def create_session(self, session_id: str, created_at: datetime) -> model.Session:
        """Create an active session, or return it unchanged if it exists and is active."""

    def load_session(self, session_id: str) -> model.Session:
        """The session; `SessionNotFoundError` or `SessionPurgedError` otherwise."""

    def load_session_status(self, session_id: str) -> model.SessionStatus:
        """The session's status (active or ended)."""

    def end_session(self, session_id: str, ended_at: datetime) -> model.Session:
        """End the session (a second end keeps the first time); runs started in it afterwards stop at once."""

    def purge_session(self, session_id: str) -> None:
        """Delete an ended session with no running run and all its runs' data; it stays purged."""

    def list_runs_by_session(self, session_id: str, statuses: Iterable[model.RunStatus] = ()) -> list[model.RunMeta]:
        """The session's runs, only those with one of `statuses` when any are given."""

    def begin_run_seed(self, declaration: model.SeedDeclaration) -> model.RunSeed:
        """Reserve the run id for one operation's initial history (an exact retry returns the same seed)."""

    def append_run_seed(self, command: model.SeedAppend) -> str:
        """Append one record to an attempt's body; the assigned position (a retry by key returns it again)."""

    def publish_run_seed(self, publication: model.SeedPublication) -> None:
        """Publish the attempt's complete body; only one attempt of a run ever publishes."""

    def find_run_preparation(self, operation: model.PreparationOperation) -> model.RunPreparation | None:
        """The operation's published body, or None while none is."""

    def settle_run_preparation(self, attempt: model.PreparationAttempt) -> model.RunPreparation | None:
        """The published body, or None after abandoning `attempt` for good."""

    def list_run_preparation_records(
        self, run_id: str, end_id: str, after_id: str = "", limit: int = 512
    ) -> model.SeedPage:
        """One page of the published body's compiled-start parts, through `end_id`."""

    def load_run_seed(self, run_id: str, end_id: str) -> model.RunSeed:
        """The published initial history whose history ends at `end_id`."""

    def list_run_seed_records(self, run_id: str, end_id: str, after_id: str = "", limit: int = 512) -> model.SeedPage:
        """One page of the published initial history records."""

    def start_root_run(self, command: model.RootRunStart) -> model.RootRunStartResult:
        """Start a run in a session with its started record (an exact retry returns the original)."""

    def start_child_run(self, command: model.ChildRunStart) -> model.ChildRunStartResult:
        """Start a child run, linking it to its running parent in the same session."""

    def start_one_shot_run(self, command: model.OneShotRunStart) -> model.OneShotRunStartResult:
        """Start a run that belongs to no session."""

    def start_one_shot_child_run(self, command: model.OneShotChildRunStart) -> model.OneShotChildRunStartResult:
        """Start a sessionless child run of a sessionless running parent."""

    def start_synchronous_run(self, command: model.SynchronousRunStart) -> model.OneShotRunStartResult:
        """Start a sessionless run executed synchronously; a retry must repeat the exact command."""

    def append_run_record(self, record: model.RunRecord) -> model.AppendResult:
        """Append an ordinary record to a running run; an exact retry returns the original id."""

    def record_run_cancellation(self, command: model.RunCancellation) -> model.AppendResult:
        """Record that a run is asked to cancel, with its reason."""

    def record_run_suspension(self, command: model.RunSuspensionCommand) -> model.AppendResult:
        """Suspend a run: its checkpoint and suspended record, together."""

    def record_run_terminal(self, command: model.RunTerminal) -> model.AppendResult:
        """Close a run as completed, failed or canceled, with its completed record."""

    def repair_run_suspension(self, command: model.RunSuspensionCommand) -> model.RunRepairResult:
        """Store a suspension, or report the closing the run already has, without an error."""

    def repair_run_terminal(self, command: model.RunTerminal) -> model.RunRepairResult:
        """Store a terminal outcome, or report the closing the run already has, without an error."""

    def load_run(self, run_id: str) -> model.RunMeta:
        """The run's meta; `RunNotFoundError` otherwise."""

    def load_run_suspension(self, run_id: str) -> model.RunSuspension:
        """The suspended run's checkpoint; `RunSuspensionNotFoundError` otherwise."""

    def list_run_records(self, run_id: str, cursor: str = "", limit: int = 100) -> model.RunRecordPage:
        """One page of the run's records, oldest first, after `cursor`."""

    def list_session_run_records(self, session_id: str, cursor: str = "", limit: int = 100) -> model.RunRecordPage:
        """One page of the session's records in commit order, after `cursor`."""

    def list_run_transcript_records(
        self, run_id: str, through_record_id: str, after_record_id: str = "", limit: int = 512
    ) -> model.RunRecordPage:
        """One page of the run's transcript records after `after_record_id`, through `through_record_id`."""


class EngineRuntimeStore:
    """The contract's rules over a backend; every mutation error is a `ContractError`."""

    def __init__(self, backend: Backend, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._backend = backend
        self._clock = clock

    def _mutate(self, operation: Callable[[UnitOfWork], T], reads: Reads | None = None) -> T:
        try:
            return self._backend.transact(operation, reads)
        except (ContractError, RuntimeStoreUnavailable):
            raise
        except RuntimeStoreError as error:
            raise wrap(error) from None

    # -- sessions ------------------------------------------------------------

    def create_session(self, session_id: str, created_at: datetime) -> model.Session:
        return _session(self._mutate(lambda uow: engine.create_session(uow, session_id, created_at)))

    def load_session(self, session_id: str) -> model.Session:
        return _session(self._readable_session(session_id))

    def load_session_status(self, session_id: str) -> model.SessionStatus:
        return model.SessionStatus(self._readable_session(session_id).status)

    def end_session(self, session_id: str, ended_at: datetime) -> model.Session:
        return _session(self._mutate(lambda uow: engine.end_session(uow, session_id, ended_at)))

    def purge_session(self, session_id: str) -> None:
        if self._mutate(lambda uow: engine.reserve_purge(uow, session_id)):
            self._backend.purge(session_id, self._backend.session_run_ids(session_id))

    def list_runs_by_session(self, session_id: str, statuses: Iterable[model.RunStatus] = ()) -> list[model.RunMeta]:
        self._readable_session(session_id)
        wanted = set(statuses)
        metas = [run.meta for run in map(self._backend.load_run, self._backend.session_run_ids(session_id)) if run]
        return [meta for meta in metas if not wanted or meta.status in wanted]

    def _readable_session(self, session_id: str) -> SessionState:
        session = self._backend.load_session(session_id) if session_id else None
        if session is None:
            raise SessionNotFoundError()
        if session.purged:
            raise SessionPurgedError()
        return session

    # -- initial history and preparations ------------------------------------------

    def begin_run_seed(self, declaration: model.SeedDeclaration) -> model.RunSeed:
        return self._mutate(lambda uow: seed_rules.begin_run_seed(uow, declaration), _begin_reads(declaration))

    def append_run_seed(self, command: model.SeedAppend) -> str:
        return self._mutate(lambda uow: seed_rules.append_run_seed(uow, command), _seed_append_reads(command))

    def publish_run_seed(self, publication: model.SeedPublication) -> None:
        reads = Reads(seed_runs=(publication.run_id,), seed_attempts=((publication.run_id, publication.attempt_id),))
        self._mutate(lambda uow: seed_rules.publish_run_seed(uow, publication), reads)

    def find_run_preparation(self, operation: model.PreparationOperation) -> model.RunPreparation | None:
        return self._mutate(lambda uow: seed_rules.find_run_preparation(uow, operation))

    def settle_run_preparation(self, attempt: model.PreparationAttempt) -> model.RunPreparation | None:
        return self._mutate(lambda uow: seed_rules.settle_run_preparation(uow, attempt))

    def load_run_seed(self, run_id: str, end_id: str) -> model.RunSeed:
        return self._mutate(lambda uow: seed_rules.published(uow, run_id, end_id)).seed()

    def list_run_seed_records(self, run_id: str, end_id: str, after_id: str = "", limit: int = 512) -> model.SeedPage:
        _positive(limit)
        attempt = self._mutate(lambda uow: seed_rules.published(uow, run_id, end_id))
        return self._seed_page(attempt, 0, int(attempt.seed_end_id), after_id, limit)

    def list_run_preparation_records(
        self, run_id: str, end_id: str, after_id: str = "", limit: int = 512
    ) -> model.SeedPage:
        _positive(limit)
        attempt = self._mutate(lambda uow: seed_rules.published_body(uow, run_id, end_id))
        return self._seed_page(attempt, int(attempt.seed_end_id), attempt.count, after_id, limit)

    def _seed_page(self, attempt: SeedAttempt, start: int, end: int, after_id: str, limit: int) -> model.SeedPage:
        """Records `start` < id <= `end` after `after_id`: at most 512 and within the page byte limit."""
        after = start
        if after_id:
            position = parse_decimal(after_id)
            if position is None or after_id != str(position) or not start < position <= end:
                raise wrap(InvalidTranscriptPositionError())
            after = position
        limit = min(limit, model.MAX_SEED_PAGE_RECORDS)
        records: list[model.SeedRecord] = []
        encoded = answered = 0
        for record in self._backend.seed_records(attempt.run_id, attempt.attempt_id, after, end):
            go_size = len(seed_checks.go_record(record))
            answered += seed_checks.answered_bytes(record, go_size)
            if len(records) == limit or (records and answered > model.MAX_RECORD_PAGE_BYTES):
                return model.SeedPage(records=records, next_cursor=records[-1].id)
            # The page as it would be sent with this record last and its id as the cursor.
            grown = encoded + go_size
            size = seed_checks.page_bytes(grown, len(records) + 1, record.id)
            if size > model.MAX_SEED_PAGE_BYTES:
                if not records:
                    raise ContractError(f"seed page size {size} exceeds {model.MAX_SEED_PAGE_BYTES} bytes")
                return model.SeedPage(records=records, next_cursor=records[-1].id)
            records.append(record)
            encoded = grown
        return model.SeedPage(records=records)

    # -- starts and records ------------------------------------------------------

    def start_root_run(self, command: model.RootRunStart) -> model.RootRunStartResult:
        return self._mutate(
            lambda uow: engine.start_root_run(uow, command, self._clock()), _start_reads(command.run, command.started)
        )

    def start_child_run(self, command: model.ChildRunStart) -> model.ChildRunStartResult:
        reads = _start_reads(command.run, command.started, command.parent_linked)
        return self._mutate(lambda uow: engine.start_child_run(uow, command, self._clock()), reads)

    def start_one_shot_run(self, command: model.OneShotRunStart) -> model.OneShotRunStartResult:
        return self._mutate(lambda uow: engine.start_one_shot_run(uow, command, self._clock()))

    def start_one_shot_child_run(self, command: model.OneShotChildRunStart) -> model.OneShotChildRunStartResult:
        return self._mutate(lambda uow: engine.start_one_shot_child_run(uow, command, self._clock()))

    def start_synchronous_run(self, command: model.SynchronousRunStart) -> model.OneShotRunStartResult:
        return self._mutate(lambda uow: engine.start_synchronous_run(uow, command, self._clock()))

    def append_run_record(self, record: model.RunRecord) -> model.AppendResult:
        return self._mutate(lambda uow: engine.append_run_record(uow, record), _record_reads(record))

    def record_run_cancellation(self, command: model.RunCancellation) -> model.AppendResult:
        reads = _record_reads(command.record)
        return self._mutate(lambda uow: engine.record_run_cancellation(uow, command, self._clock()), reads)

    def record_run_suspension(self, command: model.RunSuspensionCommand) -> model.AppendResult:
        reads = _record_reads(command.record)
        return self._mutate(lambda uow: engine.record_run_suspension(uow, command, self._clock()), reads)

    def record_run_terminal(self, command: model.RunTerminal) -> model.AppendResult:
        reads = _record_reads(command.record)
        return self._mutate(lambda uow: engine.record_run_terminal(uow, command, self._clock()), reads)

    def repair_run_suspension(self, command: model.RunSuspensionCommand) -> model.RunRepairResult:
        return self._mutate(lambda uow: engine.repair_run_suspension(uow, command, self._clock()))

    def repair_run_terminal(self, command: model.RunTerminal) -> model.RunRepairResult:
        return self._mutate(lambda uow: engine.repair_run_terminal(uow, command, self._clock()))

    # -- reads -----------------------------------------------------------------

    def load_run(self, run_id: str) -> model.RunMeta:
        run = self._backend.load_run(run_id)
        if run is None:
            raise RunNotFoundError()
        return run.meta

    def load_run_suspension(self, run_id: str) -> model.RunSuspension:
        self.load_run(run_id)
        suspension = self._backend.load_checkpoint(run_id)
        if suspension is None:
            raise RunSuspensionNotFoundError()
        return suspension

    def list_run_records(self, run_id: str, cursor: str = "", limit: int = 100) -> model.RunRecordPage:
        after = _page_start(cursor, limit)
        self.load_run(run_id)
        events: list[model.RunRecord] = []
        size = 0
        # One item beyond the page tells whether another page follows.
        for record in self._backend.records(run_id, after, page_size=limit + 1):
            size += model.record_answer_bytes(record)
            if len(events) == limit or (events and size > model.MAX_RECORD_PAGE_BYTES):
                return model.RunRecordPage(events=events, next_cursor=events[-1].id)
            events.append(record)
        return model.RunRecordPage(events=events)

    def list_session_run_records(self, session_id: str, cursor: str = "", limit: int = 100) -> model.RunRecordPage:
        after = _page_start(cursor, limit)
        self._readable_session(session_id)
        events: list[model.RunRecord] = []
        position = after  # the cursor is a position in the session's list, not a record id
        size = 0
        for pointer in self._backend.pointers(session_id, after):
            if len(events) == limit:
                return model.RunRecordPage(events=events, next_cursor=str(position))
            record = self._backend.record(pointer.run_id, pointer.record_id)
            if record is not None:
                size += model.record_answer_bytes(record)
                if events and size > model.MAX_RECORD_PAGE_BYTES:
                    return model.RunRecordPage(events=events, next_cursor=str(position))
                events.append(record)
            position = pointer.position
        return model.RunRecordPage(events=events)

    def list_run_transcript_records(
        self,
        run_id: str,
        through_record_id: str,
        after_record_id: str = "",
        limit: int = model.MAX_TRANSCRIPT_PAGE_RECORDS,
    ) -> model.RunRecordPage:
        if not through_record_id or limit <= 0:
            raise wrap(InvalidTranscriptPositionError())
        self.load_run(run_id)
        invalid = ContractError(InvalidTranscriptPositionError(), f'invalid transcript position: run "{run_id}"')
        through = self._backend.record(run_id, through_record_id)
        if through is None:
            raise invalid
        after_seq = 0
        if after_record_id:
            after = self._backend.record(run_id, after_record_id)
            if after is None or after.type not in model.TRANSCRIPT_TYPES or int(after.id) > int(through.id):
                raise invalid
            after_seq = int(after.id)
        limit = min(limit, model.MAX_TRANSCRIPT_PAGE_RECORDS)
        events: list[model.RunRecord] = []
        size = answered = 0  # goa-ai's rule counts payloads; a Lambda answer counts everything, escaped
        for record in self._backend.records(run_id, after_seq, int(through.id)):
            if record.type not in model.TRANSCRIPT_TYPES:
                continue
            answered += model.record_answer_bytes(record)
            if len(record.payload) > model.MAX_TRANSCRIPT_PAGE_BYTES:
                if events:
                    break
                raise ContractError(
                    f'transcript record "{record.id}" payload size {len(record.payload)} exceeds supported page '
                    f"size {model.MAX_TRANSCRIPT_PAGE_BYTES} bytes"
                )
            payloads = size + len(record.payload)
            full = payloads > model.MAX_TRANSCRIPT_PAGE_BYTES or answered > model.MAX_RECORD_PAGE_BYTES
            if len(events) == limit or (events and full):
                return model.RunRecordPage(events=events, next_cursor=events[-1].id)
            events.append(record)
            size += len(record.payload)
        return model.RunRecordPage(events=events)


def _positive(limit: int) -> None:
    if limit <= 0:
        raise wrap(InvalidTranscriptPositionError())


def _page_start(cursor: str, limit: int) -> int:
    if limit <= 0:
        raise ContractError("limit must be greater than zero")
    if not cursor:
        return 0
    start = parse_decimal(cursor)
    if start is None or start <= 0 or cursor != str(start):
        raise ContractError(f'invalid cursor "{cursor[:40]}"')
    return start


def _session(state: SessionState) -> model.Session:
    return model.Session(
        id=state.id, status=model.SessionStatus(state.status), created_at=state.created_at, ended_at=state.ended_at
    )


def _record_reads(record: model.RunRecord) -> Reads:
    """An append's first reads: its run, the session the record names, and its key."""
    sessions = (record.session_id,) if record.session_id else ()
    return Reads(runs=(record.run_id,), sessions=sessions, keys=((record.run_id, record.event_key),))


def _start_reads(run: model.RunStart, started: model.RunRecord, parent_linked: model.RunRecord | None = None) -> Reads:
    """A start's first reads: the new run, its session and parent, the started and parent-link keys."""
    runs = (run.run_id, run.parent_run_id) if parent_linked is not None and run.parent_run_id else (run.run_id,)
    record_keys = [(run.run_id, started.event_key)]
    if parent_linked is not None:
        record_keys.append((run.parent_run_id, parent_linked.event_key))
    sessions = (run.session_id,) if run.session_id else ()
    # A start attaching a seed checks the attempt its seed head published.
    seed_runs = (run.run_id,) if run.seed_end_id else ()
    return Reads(runs=runs, sessions=sessions, keys=tuple(record_keys), seed_runs=seed_runs)


def _begin_reads(declaration: model.SeedDeclaration) -> Reads:
    """A seed's first reads: its session, its run (which must not exist yet) and source, its head and attempt."""
    runs = (declaration.run_id, declaration.source_run_id) if declaration.source_run_id else (declaration.run_id,)
    return Reads(
        runs=runs,
        sessions=(declaration.session_id,) if declaration.session_id else (),
        seed_runs=(declaration.run_id,),
        seed_attempts=((declaration.run_id, declaration.attempt_id),),
    )


def _seed_append_reads(command: model.SeedAppend) -> Reads:
    """A seed append's first reads: the attempt and the record's key (its session is known from the attempt)."""
    attempt = (command.run_id, command.attempt_id)
    return Reads(seed_attempts=(attempt,), seed_keys=((*attempt, command.record.key),))
