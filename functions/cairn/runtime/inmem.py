"""The reference backend: dictionaries behind one lock, like goa-ai's inmem store."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from cairn.decimal_text import is_decimal
from cairn.runtime.model import RunRecord, RunSuspension
from cairn.runtime.state import PURGED, BufferedUnitOfWork, Pointer, RunState, SessionState, UnitOfWork
from cairn.runtime.store import EngineRuntimeStore

T = TypeVar("T")


class InMemoryBackend:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.sessions: dict[str, SessionState] = {}
        self.runs: dict[str, RunState] = {}
        self.run_records: dict[str, list[RunRecord]] = {}
        self.checkpoints: dict[str, RunSuspension] = {}
        self.session_lists: dict[str, list[Pointer]] = {}
        self.session_runs: dict[str, list[str]] = {}
        self.record_keys: dict[tuple[str, str], RunRecord] = {}

    def transact(self, operation: Callable[[UnitOfWork], T]) -> T:
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

    def load_session(self, session_id: str) -> SessionState | None:
        with self._lock:
            return copy.deepcopy(self.sessions.get(session_id))

    def load_run(self, run_id: str) -> RunState | None:
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
            index = int(record_id) - 1 if is_decimal(record_id) else -1
            return records[index] if 0 <= index < len(records) else None

    def pointers(self, session_id: str, after_position: int) -> Iterator[Pointer]:
        with self._lock:
            return iter(list(self.session_lists.get(session_id, [])[after_position:]))

    def purge(self, session_id: str, run_ids: list[str]) -> None:
        with self._lock:
            for run_id in run_ids:
                for record in self.run_records.get(run_id, []):
                    self.record_keys.pop((run_id, record.event_key), None)
                for table in (self.runs, self.run_records, self.checkpoints):
                    table.pop(run_id, None)
            self.session_lists.pop(session_id, None)
            self.session_runs.pop(session_id, None)
            self.sessions[session_id].status = PURGED


class _InMemoryUnitOfWork(BufferedUnitOfWork):
    def __init__(self, backend: InMemoryBackend) -> None:
        super().__init__()
        self._backend = backend

    def load_session(self, session_id: str) -> SessionState | None:
        return self._backend.load_session(session_id)

    def load_run(self, run_id: str) -> RunState | None:
        return self._backend.load_run(run_id)

    def load_record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        return self._backend.record_keys.get((run_id, event_key))

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        return self._backend.load_checkpoint(run_id)


class InMemoryRuntimeStore(EngineRuntimeStore):
    """The reference runtime store; state lives and dies with the process."""

    def __init__(self, **kwargs) -> None:
        super().__init__(InMemoryBackend(), **kwargs)
