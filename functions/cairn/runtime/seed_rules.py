"""The rules of initial history ("seeds") and preparations, over a `UnitOfWork`.

A run id is bound to one original operation (agent, run, session,
command) by its `SeedHead`; each upload of the body is a `SeedAttempt`
under it. Publication and settlement both decide on the head in one unit
of work, so an attempt is either the published winner or abandoned for
good. Checks and their order follow goa-ai's reference store.
"""

from __future__ import annotations

from dataclasses import replace

from cairn.decimal_text import parse_decimal
from cairn.runtime import seed_checks
from cairn.runtime.errors import (
    InvalidTranscriptPositionError,
    PreparationAbandonedError,
    RunConflictError,
    RunNotFoundError,
    RunRecordOwnerMismatchError,
    SeedConflictError,
    SeedNotFoundError,
    SessionNotFoundError,
    SessionPurgedError,
    wrap,
)
from cairn.runtime.model import (
    HistoryPrefix,
    PreparationAttempt,
    PreparationOperation,
    RunPreparation,
    RunSeed,
    RunStart,
    RunStatus,
    SeedAppend,
    SeedDeclaration,
    SeedKind,
    SeedPage,
    SeedPublication,
)
from cairn.runtime.state import PublishedSeed, SeedAttempt, SeedHead, UnitOfWork
from cairn.runtime.validation import fail


def operation_of(declaration: SeedDeclaration) -> PreparationOperation:
    return PreparationOperation(
        agent_id=declaration.agent_id,
        run_id=declaration.run_id,
        command_id=declaration.command_id,
        session_id=declaration.session_id,
    )


def owner_exists(uow: UnitOfWork, session_id: str, *, checked_at_commit: bool = False) -> None:
    """A sessionful body lives only while its session does.

    `checked_at_commit`: the rule writes, so the backend may leave the session unread and make its
    life a condition of the commit (`UnitOfWork.session_assumed_live`).
    """
    if not session_id or (checked_at_commit and uow.session_assumed_live(session_id)):
        return
    session = uow.session(session_id)
    if session is None:
        raise wrap(SessionNotFoundError())
    if session.purged:
        raise wrap(SessionPurgedError())


def begin_run_seed(uow: UnitOfWork, declaration: SeedDeclaration) -> RunSeed:
    seed_checks.validate_declaration(declaration)
    owner_exists(uow, declaration.session_id)
    operation = operation_of(declaration)
    head = uow.seed_head(declaration.run_id)
    if head is not None and head.operation != operation:
        raise wrap(SeedConflictError())
    attempt = uow.seed_attempt(declaration.run_id, declaration.attempt_id)
    if attempt is not None:
        if attempt.abandoned:
            raise wrap(PreparationAbandonedError())
        if attempt.declaration != declaration:
            raise wrap(SeedConflictError())
        return attempt.seed()
    if head is not None and head.published_attempt:
        raise wrap(SeedConflictError())
    if uow.run(declaration.run_id) is not None:
        raise wrap(RunConflictError())
    source = _source(uow, declaration)
    if head is None:
        uow.save_seed_head(SeedHead(operation=operation))
    attempt = SeedAttempt(
        operation=operation, attempt_id=declaration.attempt_id, declaration=declaration, source=source
    )
    uow.save_seed_attempt(attempt)
    return attempt.seed()


def _source(uow: UnitOfWork, declaration: SeedDeclaration) -> HistoryPrefix | None:
    """The declared source, proven usable, at the position the store captures for it."""
    if declaration.kind == SeedKind.LITERAL:
        return None
    source = uow.run(declaration.source_run_id)
    if source is None:
        raise wrap(RunNotFoundError())
    meta = source.meta
    if meta.session_id != declaration.session_id or meta.agent_id != declaration.agent_id:
        raise wrap(RunRecordOwnerMismatchError())
    expected = RunStatus.SUSPENDED if declaration.kind == SeedKind.CONTINUATION else RunStatus.COMPLETED
    if meta.status != expected:
        raise fail(f'history source "{declaration.source_run_id}" has status "{meta.status}", want "{expected}"')
    if declaration.kind == SeedKind.NEXT_TURN:
        terminal = uow.record_by_key(meta.run_id, source.terminal_key) if source.terminal_key else None
        if terminal is None:
            raise fail(f'completed history source "{declaration.source_run_id}" has no terminal record')
        end_id = terminal.id
    else:
        end_id = declaration.source_end_id
        if end_id != str(_position(end_id)) or not 0 < _position(end_id) <= source.next_seq:
            raise wrap(InvalidTranscriptPositionError())
    return HistoryPrefix(
        run_id=declaration.source_run_id,
        end_id=end_id,
        exclude_system=declaration.kind == SeedKind.NEXT_TURN,
        exclude_reasoning=declaration.exclude_reasoning,
    )


def _position(text: str) -> int:
    position = parse_decimal(text)
    return -1 if position is None else position


def _open_attempt(uow: UnitOfWork, run_id: str, attempt_id: str) -> SeedAttempt:
    attempt = uow.seed_attempt(run_id, attempt_id)
    if attempt is None:
        raise wrap(SeedNotFoundError())
    owner_exists(uow, attempt.operation.session_id, checked_at_commit=True)
    if attempt.abandoned:
        raise wrap(PreparationAbandonedError())
    return attempt


def append_run_seed(uow: UnitOfWork, command: SeedAppend) -> str:
    seed_checks.validate_append(command)
    attempt = _open_attempt(uow, command.run_id, command.attempt_id)
    record = command.record
    stored = uow.seed_record_by_key(command.run_id, command.attempt_id, record.key)
    if stored is not None:
        if replace(record, id=stored.id) != stored:
            raise wrap(SeedConflictError())
        return stored.id
    if attempt.published or record.previous_id != attempt.end_id:
        raise wrap(SeedConflictError())
    if attempt.literal_open and record.literal_part is None:
        raise wrap(SeedConflictError())
    if attempt.prepared_bytes > 0 and not record.prepared:
        raise wrap(SeedConflictError())
    if record.prefix is not None and (attempt.has_source or record.prefix != attempt.source):
        raise wrap(SeedConflictError())
    assigned = replace(record, id=str(attempt.count + 1))
    # The record must fit a page of its own, with its id as the next cursor.
    too_large = seed_checks.page_size_error(SeedPage(records=[assigned], next_cursor=assigned.id))
    if too_large:
        raise fail(too_large)
    attempt.count += 1
    attempt.end_id = assigned.id
    attempt.has_source = attempt.has_source or record.prefix is not None
    attempt.literal_open = record.literal_part is not None and not record.literal_part.final
    if record.prepared:
        attempt.prepared_bytes += len(record.prepared)
    else:
        attempt.seed_end_id = assigned.id
    uow.add_seed_record(command.run_id, command.attempt_id, assigned)
    uow.save_seed_attempt(attempt)
    return assigned.id


def publish_run_seed(uow: UnitOfWork, publication: SeedPublication) -> None:
    attempt = _open_attempt(uow, publication.run_id, publication.attempt_id)
    if (
        publication.seed_end_id != attempt.seed_end_id
        or publication.end_id != attempt.end_id
        or publication.prepared_bytes <= 0
        or publication.prepared_bytes != attempt.prepared_bytes
        or (attempt.source is not None and not attempt.has_source)
        or attempt.literal_open
    ):
        raise wrap(SeedConflictError())
    head = uow.seed_head(publication.run_id)
    if head is None:
        raise wrap(SeedNotFoundError())
    if head.published_attempt and head.published_attempt != publication.attempt_id:
        raise wrap(SeedConflictError())
    if not attempt.published:
        attempt.published = True
        head.published_attempt = publication.attempt_id
        head.published = _summary(attempt)
        uow.save_seed_attempt(attempt)
        uow.save_seed_head(head)


def find_run_preparation(uow: UnitOfWork, operation: PreparationOperation) -> RunPreparation | None:
    seed_checks.validate_operation(operation)
    return _accepted(uow, operation)


def settle_run_preparation(uow: UnitOfWork, attempt: PreparationAttempt) -> RunPreparation | None:
    """The accepted body, or None after durably abandoning `attempt` so it can never publish."""
    seed_checks.validate_attempt(attempt)
    operation = attempt.operation
    accepted = _accepted(uow, operation)
    if accepted is not None:
        return accepted
    if uow.seed_head(operation.run_id) is None:
        uow.save_seed_head(SeedHead(operation=operation))
    state = uow.seed_attempt(operation.run_id, attempt.attempt_id)
    if state is not None and state.operation != operation:
        raise wrap(SeedConflictError())
    if state is None:
        state = SeedAttempt(operation=operation, attempt_id=attempt.attempt_id)
    if not state.abandoned:
        state.abandoned = True
        uow.save_seed_attempt(state)
    return None


def _accepted(uow: UnitOfWork, operation: PreparationOperation) -> RunPreparation | None:
    owner_exists(uow, operation.session_id)
    head = uow.seed_head(operation.run_id)
    if head is not None and head.operation != operation:
        raise wrap(SeedConflictError())
    if head is None or not head.published_attempt:
        return None
    attempt = uow.seed_attempt(operation.run_id, head.published_attempt)
    if attempt is None or attempt.operation != operation:
        raise wrap(SeedConflictError())
    return RunPreparation(seed=attempt.seed(), end_id=attempt.end_id, prepared_bytes=attempt.prepared_bytes)


def _published(uow: UnitOfWork, run_id: str) -> SeedAttempt:
    head = uow.seed_head(run_id)
    attempt = uow.seed_attempt(run_id, head.published_attempt) if head and head.published_attempt else None
    if attempt is None:
        raise wrap(SeedNotFoundError())
    owner_exists(uow, attempt.operation.session_id)
    return attempt


def published(uow: UnitOfWork, run_id: str, end_id: str) -> SeedAttempt:
    """The run's published attempt, whose history ends at `end_id`."""
    attempt = _published(uow, run_id)
    if attempt.seed_end_id != end_id:
        raise wrap(SeedConflictError())
    return attempt


def published_body(uow: UnitOfWork, run_id: str, end_id: str) -> SeedAttempt:
    """The run's published attempt, whose whole body (compiled start included) ends at `end_id`."""
    attempt = _published(uow, run_id)
    if attempt.end_id != end_id:
        raise wrap(SeedConflictError())
    return attempt


def check_start_seed(uow: UnitOfWork, start: RunStart) -> None:
    """A start attaches exactly the history published for it; an empty `seed_end_id` attaches none."""
    if not start.seed_end_id:
        return
    operation, seed = _attached(uow, start.run_id, start.seed_end_id)
    if operation.agent_id != start.agent_id or operation.session_id != start.session_id:
        raise wrap(RunRecordOwnerMismatchError())
    continuation = seed.kind == SeedKind.CONTINUATION
    if continuation != bool(start.predecessor_run_id) or (
        continuation and seed.source_run_id != start.predecessor_run_id
    ):
        raise wrap(SeedConflictError())


def _attached(uow: UnitOfWork, run_id: str, end_id: str) -> tuple[PreparationOperation, PublishedSeed]:
    """The published history's owner and summary: from its head when the head keeps the summary,
    else from the attempt itself, with the same checks in the same order."""
    head = uow.seed_head(run_id)
    if head is None or not head.published_attempt or head.published is None:
        attempt = published(uow, run_id, end_id)
        return attempt.operation, _summary(attempt)
    owner_exists(uow, head.operation.session_id)
    if head.published.seed_end_id != end_id:
        raise wrap(SeedConflictError())
    return head.operation, head.published


def _summary(attempt: SeedAttempt) -> PublishedSeed:
    declaration = attempt.declaration
    assert declaration is not None  # only begun attempts publish
    return PublishedSeed(attempt.seed_end_id, declaration.kind, declaration.source_run_id)
