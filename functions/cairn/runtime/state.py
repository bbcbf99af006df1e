"""What the rules read and write, and the unit of work that carries it.

The rule engine reads sessions, runs, records and checkpoints through a
`UnitOfWork`, changes them in memory, and the backend commits every change
of one operation at once (under a lock in memory, as one conditional
`TransactWriteItems` in DynamoDB). The rules exist once; backends only load
and commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from cairn.runtime.model import (
    EMPTY_SEED_END_ID,
    HistoryPrefix,
    PreparationOperation,
    RunMeta,
    RunRecord,
    RunSeed,
    RunSuspension,
    SeedDeclaration,
    SeedKind,
    SeedRecord,
)

# Who executes a run, bound at its first start for life.
ENGINE_OWNER = 1
SYNCHRONOUS_OWNER = 2

# Session lifecycle as stored: `purging` and `purged` both read as purged.
ACTIVE = "active"
ENDED = "ended"
PURGING = "purging"
PURGED = "purged"


@dataclass
class SessionState:
    id: str
    status: str
    created_at: datetime
    ended_at: datetime | None = None
    list_seq: int = 0
    # Runs of this session still running: purge waits for zero.
    running_runs: int = 0
    version: int = 0

    @property
    def purged(self) -> bool:
        return self.status in (PURGING, PURGED)


@dataclass
class RunState:
    """Run meta plus what the contract binds to the run for its lifetime."""

    meta: RunMeta
    owner_kind: int = ENGINE_OWNER
    request_digest: bytes = b""
    predecessor_run_id: str = ""
    start_key: str = ""
    parent_link_key: str = ""
    cancellation_key: str = ""
    suspension_key: str = ""
    terminal_key: str = ""
    next_seq: int = 0
    version: int = 0

    def update(self, **changes: Any) -> None:
        self.meta = replace(self.meta, **changes)


@dataclass
class Pointer:
    """One entry of a session's commit-ordered record list."""

    position: int
    run_id: str
    record_id: str


@dataclass(frozen=True)
class PublishedSeed:
    """What a start attaching a run's published history checks, copied from the attempt as it is
    published: a published attempt never changes, so its head can answer a start alone."""

    seed_end_id: str
    kind: SeedKind
    source_run_id: str = ""


@dataclass
class SeedHead:
    """What a run id is bound to before its start: one operation, at most one published attempt.

    `published` is that attempt's summary (None before it is published, and on heads kept from
    before heads carried one: a start then reads the attempt).
    """

    operation: PreparationOperation
    published_attempt: str = ""
    published: PublishedSeed | None = None
    version: int = 0

    @property
    def run_id(self) -> str:
        return self.operation.run_id


@dataclass
class SeedAttempt:
    """One candidate upload of a run's initial history and compiled start.

    `declaration` is None for an attempt settled (abandoned) before its first
    begin. `seed_end_id` is the end of the history records, `end_id` the end
    of the whole body, compiled-start parts included.
    """

    operation: PreparationOperation
    attempt_id: str
    declaration: SeedDeclaration | None = None
    source: HistoryPrefix | None = None
    seed_end_id: str = EMPTY_SEED_END_ID
    end_id: str = EMPTY_SEED_END_ID
    count: int = 0
    prepared_bytes: int = 0
    literal_open: bool = False
    has_source: bool = False
    published: bool = False
    abandoned: bool = False
    version: int = 0

    @property
    def run_id(self) -> str:
        return self.operation.run_id

    def seed(self) -> RunSeed:
        assert self.declaration is not None
        return RunSeed(declaration=self.declaration, end_id=self.seed_end_id, source=self.source)


class UnitOfWork(Protocol):
    def session(self, session_id: str) -> SessionState | None: ...

    def session_assumed_live(self, session_id: str) -> bool: ...

    def run(self, run_id: str) -> RunState | None: ...

    def record_by_key(self, run_id: str, event_key: str) -> RunRecord | None: ...

    def checkpoint(self, run_id: str) -> RunSuspension | None: ...

    def save_session(self, session: SessionState) -> None: ...

    def save_run(self, run: RunState) -> None: ...

    def add_record(self, record: RunRecord) -> None: ...

    def add_pointer(self, session_id: str, pointer: Pointer) -> None: ...

    def save_checkpoint(self, run_id: str, suspension: RunSuspension) -> None: ...

    def seed_head(self, run_id: str) -> SeedHead | None: ...

    def seed_attempt(self, run_id: str, attempt_id: str) -> SeedAttempt | None: ...

    def seed_record_by_key(self, run_id: str, attempt_id: str, key: str) -> SeedRecord | None: ...

    def save_seed_head(self, head: SeedHead) -> None: ...

    def save_seed_attempt(self, attempt: SeedAttempt) -> None: ...

    def add_seed_record(self, run_id: str, attempt_id: str, record: SeedRecord) -> None: ...


@dataclass
class PendingWrites:
    """Changes of one operation, kept until the backend commits them."""

    sessions: dict[str, SessionState] = field(default_factory=dict)
    runs: dict[str, RunState] = field(default_factory=dict)
    records: list[RunRecord] = field(default_factory=list)
    pointers: list[tuple[str, Pointer]] = field(default_factory=list)
    checkpoints: dict[str, RunSuspension] = field(default_factory=dict)
    seed_heads: dict[str, SeedHead] = field(default_factory=dict)
    seed_attempts: dict[tuple[str, str], SeedAttempt] = field(default_factory=dict)
    seed_records: list[tuple[str, str, SeedRecord]] = field(default_factory=list)

    def any(self) -> bool:
        return any(vars(self).values())


class BufferedUnitOfWork:
    """Reads through to a backend once per item; writes are buffered and read back."""

    def __init__(self) -> None:
        self.writes = PendingWrites()
        self._sessions: dict[str, SessionState | None] = {}
        self._runs: dict[str, RunState | None] = {}
        self._records: dict[tuple[str, str], RunRecord | None] = {}
        self._checkpoints: dict[str, RunSuspension | None] = {}
        self._seed_heads: dict[str, SeedHead | None] = {}
        self._seed_attempts: dict[tuple[str, str], SeedAttempt | None] = {}
        self._seed_records: dict[tuple[str, str, str], SeedRecord | None] = {}

    # Backends implement these loads.
    def load_session(self, session_id: str) -> SessionState | None:
        raise NotImplementedError

    def load_run(self, run_id: str) -> RunState | None:
        raise NotImplementedError

    def load_record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        raise NotImplementedError

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        raise NotImplementedError

    def load_seed_head(self, run_id: str) -> SeedHead | None:
        raise NotImplementedError

    def load_seed_attempt(self, run_id: str, attempt_id: str) -> SeedAttempt | None:
        raise NotImplementedError

    def load_seed_record_by_key(self, run_id: str, attempt_id: str, key: str) -> SeedRecord | None:
        raise NotImplementedError

    def session(self, session_id: str) -> SessionState | None:
        if session_id not in self._sessions:
            self._sessions[session_id] = self.load_session(session_id)
        return self._sessions[session_id]

    def session_assumed_live(self, session_id: str) -> bool:
        """Whether a writing rule may take the session as there and not purged without reading it: the
        commit then makes that its condition. By default never: the rule reads the session."""
        return False

    def run(self, run_id: str) -> RunState | None:
        if run_id not in self._runs:
            self._runs[run_id] = self.load_run(run_id)
        return self._runs[run_id]

    def record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        for record in self.writes.records:
            if record.run_id == run_id and record.event_key == event_key:
                return record
        if (run_id, event_key) not in self._records:
            self._records[(run_id, event_key)] = self.load_record_by_key(run_id, event_key)
        return self._records[(run_id, event_key)]

    def checkpoint(self, run_id: str) -> RunSuspension | None:
        if run_id in self.writes.checkpoints:
            return self.writes.checkpoints[run_id]
        if run_id not in self._checkpoints:
            self._checkpoints[run_id] = self.load_checkpoint(run_id)
        return self._checkpoints[run_id]

    def save_session(self, session: SessionState) -> None:
        self._sessions[session.id] = session
        self.writes.sessions[session.id] = session

    def save_run(self, run: RunState) -> None:
        self._runs[run.meta.run_id] = run
        self.writes.runs[run.meta.run_id] = run

    def add_record(self, record: RunRecord) -> None:
        self.writes.records.append(record)

    def add_pointer(self, session_id: str, pointer: Pointer) -> None:
        self.writes.pointers.append((session_id, pointer))

    def save_checkpoint(self, run_id: str, suspension: RunSuspension) -> None:
        self.writes.checkpoints[run_id] = suspension

    def seed_head(self, run_id: str) -> SeedHead | None:
        if run_id not in self._seed_heads:
            self._seed_heads[run_id] = self.load_seed_head(run_id)
        return self._seed_heads[run_id]

    def seed_attempt(self, run_id: str, attempt_id: str) -> SeedAttempt | None:
        if (run_id, attempt_id) not in self._seed_attempts:
            self._seed_attempts[(run_id, attempt_id)] = self.load_seed_attempt(run_id, attempt_id)
        return self._seed_attempts[(run_id, attempt_id)]

    def seed_record_by_key(self, run_id: str, attempt_id: str, key: str) -> SeedRecord | None:
        for written_run, written_attempt, record in self.writes.seed_records:
            if (written_run, written_attempt, record.key) == (run_id, attempt_id, key):
                return record
        if (run_id, attempt_id, key) not in self._seed_records:
            self._seed_records[(run_id, attempt_id, key)] = self.load_seed_record_by_key(run_id, attempt_id, key)
        return self._seed_records[(run_id, attempt_id, key)]

    def save_seed_head(self, head: SeedHead) -> None:
        self._seed_heads[head.run_id] = head
        self.writes.seed_heads[head.run_id] = head

    def save_seed_attempt(self, attempt: SeedAttempt) -> None:
        self._seed_attempts[(attempt.run_id, attempt.attempt_id)] = attempt
        self.writes.seed_attempts[(attempt.run_id, attempt.attempt_id)] = attempt

    def add_seed_record(self, run_id: str, attempt_id: str, record: SeedRecord) -> None:
        self.writes.seed_records.append((run_id, attempt_id, record))
