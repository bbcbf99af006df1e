"""The reference backend: dictionaries behind one lock, like goa-ai's inmem store."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TypeVar

from cairn.decimal_text import parse_decimal
from cairn.runtime import state
from cairn.runtime.backend import Reads
from cairn.runtime.model import RunRecord, RunSuspension, SeedRecord
from cairn.runtime.store import EngineRuntimeStore, utc_now

T = TypeVar("T")


class InMemoryBackend:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.sessions: dict[str, state.SessionState] = {}
        self.runs: dict[str, state.RunState] = {}
        self.run_records: dict[str, list[RunRecord]] = {}
        self.checkpoints: dict[str, RunSuspension] = {}
        self.session_lists: dict[str, list[state.Pointer]] = {}
        self.session_runs: dict[str, list[str]] = {}
        self.record_keys: dict[tuple[str, str], RunRecord] = {}
        self.seed_heads: dict[str, state.SeedHead] = {}
        self.seed_attempts: dict[tuple[str, str], state.SeedAttempt] = {}
        self.seed_bodies: dict[tuple[str, str], list[SeedRecord]] = {}
        self.seed_keys: dict[tuple[str, str, str], SeedRecord] = {}
        self.session_seeds: dict[str, set[str]] = {}

    def transact(self, operation: Callable[[state.UnitOfWork], T], reads: Reads | None = None) -> T:
        with self._lock:
            unit = _InMemoryUnitOfWork(self)
            result = operation(unit)
            self._apply(unit)
            return copy.deepcopy(result)

    def _apply(self, unit: _InMemoryUnitOfWork) -> None:
        writes = unit.writes
        for session in writes.sessions.values():
            self.sessions[session.id] = copy.deepcopy(session)
        for run_id, run in writes.runs.items():
            if run_id not in self.runs and run.meta.session_id:
                self.session_runs.setdefault(run.meta.session_id, []).append(run_id)
            self.runs[run_id] = copy.deepcopy(run)
        for record in writes.records:
            self.run_records.setdefault(record.run_id, []).append(record)
            self.record_keys[(record.run_id, record.event_key)] = record
        for session_id, pointer in writes.pointers:
            self.session_lists.setdefault(session_id, []).append(pointer)
        self.checkpoints.update(writes.checkpoints)
        for run_id, head in writes.seed_heads.items():
            if head.operation.session_id:
                self.session_seeds.setdefault(head.operation.session_id, set()).add(run_id)
            self.seed_heads[run_id] = copy.deepcopy(head)
        for attempt_key, attempt in writes.seed_attempts.items():
            self.seed_attempts[attempt_key] = copy.deepcopy(attempt)
        for run_id, attempt_id, seed_record in writes.seed_records:
            self.seed_bodies.setdefault((run_id, attempt_id), []).append(seed_record)
            self.seed_keys[(run_id, attempt_id, seed_record.key)] = seed_record

    def load_session(self, session_id: str) -> state.SessionState | None:
        with self._lock:
            return copy.deepcopy(self.sessions.get(session_id))

    def load_run(self, run_id: str) -> state.RunState | None:
        with self._lock:
            return copy.deepcopy(self.runs.get(run_id))

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        with self._lock:
            return self.checkpoints.get(run_id)

    def session_run_ids(self, session_id: str) -> list[str]:
        with self._lock:
            return list(self.session_runs.get(session_id, []))

    def records(
        self, run_id: str, after_seq: int, through_seq: int | None = None, page_size: int = 200
    ) -> Iterator[RunRecord]:
        with self._lock:
            chosen = self.run_records.get(run_id, [])[after_seq:through_seq]
        return iter(chosen)

    def record(self, run_id: str, record_id: str) -> RunRecord | None:
        with self._lock:
            records = self.run_records.get(run_id, [])
            number = parse_decimal(record_id)
            index = -1 if number is None else number - 1
            return records[index] if 0 <= index < len(records) else None

    def pointers(self, session_id: str, after_position: int) -> Iterator[state.Pointer]:
        with self._lock:
            return iter(list(self.session_lists.get(session_id, [])[after_position:]))

    def seed_records(self, run_id: str, attempt_id: str, after_id: int, through_id: int) -> Iterator[SeedRecord]:
        with self._lock:
            return iter(list(self.seed_bodies.get((run_id, attempt_id), [])[after_id:through_id]))

    def purge(self, session_id: str, run_ids: list[str]) -> None:
        with self._lock:
            for run_id in self.session_seeds.pop(session_id, set()):
                self.seed_heads.pop(run_id, None)
                for attempt_key in [attempt_key for attempt_key in self.seed_attempts if attempt_key[0] == run_id]:
                    self.seed_attempts.pop(attempt_key)
                    for seed_record in self.seed_bodies.pop(attempt_key, []):
                        self.seed_keys.pop((*attempt_key, seed_record.key), None)
            for run_id in run_ids:
                for record in self.run_records.get(run_id, []):
                    self.record_keys.pop((run_id, record.event_key), None)
                for table in (self.runs, self.run_records, self.checkpoints):
                    table.pop(run_id, None)
            self.session_lists.pop(session_id, None)
            self.session_runs.pop(session_id, None)
            self.sessions[session_id].status = state.PURGED


class _InMemoryUnitOfWork(state.BufferedUnitOfWork):
    def __init__(self, backend: InMemoryBackend) -> None:
        super().__init__()
        self._backend = backend

    def load_session(self, session_id: str) -> state.SessionState | None:
        return self._backend.load_session(session_id)

    def load_run(self, run_id: str) -> state.RunState | None:
        return self._backend.load_run(run_id)

    def load_record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        return self._backend.record_keys.get((run_id, event_key))

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        return self._backend.load_checkpoint(run_id)

    def load_seed_head(self, run_id: str) -> state.SeedHead | None:
        return copy.deepcopy(self._backend.seed_heads.get(run_id))

    def load_seed_attempt(self, run_id: str, attempt_id: str) -> state.SeedAttempt | None:
        return copy.deepcopy(self._backend.seed_attempts.get((run_id, attempt_id)))

    def load_seed_record_by_key(self, run_id: str, attempt_id: str, key: str) -> SeedRecord | None:
        return self._backend.seed_keys.get((run_id, attempt_id, key))


class InMemoryRuntimeStore(EngineRuntimeStore):
    """The reference runtime store; state lives and dies with the process."""

    def __init__(self, *, clock: Callable[[], datetime] = utc_now) -> None:
        super().__init__(InMemoryBackend(), clock=clock)
