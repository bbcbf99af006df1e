"""What a storage backend gives the runtime store: atomic units of work and reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from cairn.runtime.model import RunRecord, RunSuspension, SeedRecord
from cairn.runtime.state import Pointer, RunState, SessionState, UnitOfWork

T = TypeVar("T")


@dataclass(frozen=True)
class Reads:
    """What an operation reads first: run, session and seed heads, seed attempts, and the keys it will claim.

    A backend may fetch them all at once, or trust what it last wrote for the
    heads and let the commit's conditions check them; either way the
    operation sees the same state.
    """

    runs: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    # (run id, event key) of each record the operation appends.
    keys: tuple[tuple[str, str], ...] = ()
    # Runs whose seed head the operation reads; (run id, attempt id) of each seed attempt it reads,
    # its declaration with it; (run id, attempt id, key) of each seed record it appends.
    seed_runs: tuple[str, ...] = ()
    seed_attempts: tuple[tuple[str, str], ...] = ()
    seed_keys: tuple[tuple[str, str, str], ...] = ()


class Backend(Protocol):
    def transact(self, operation: Callable[[UnitOfWork], T], reads: Reads | None = None) -> T:
        """Run `operation` on fresh state and commit its changes atomically.

        If something it read changed before the commit, it runs again; it
        raises what `operation` raises and commits nothing then. `reads`:
        what it will read first, when known.
        """

    def load_session(self, session_id: str) -> SessionState | None: ...

    def load_run(self, run_id: str) -> RunState | None: ...

    def load_checkpoint(self, run_id: str) -> RunSuspension | None: ...

    def session_run_ids(self, session_id: str) -> list[str]: ...

    def records(
        self, run_id: str, after_seq: int, through_seq: int | None = None, page_size: int = 200
    ) -> Iterator[RunRecord]:
        """Records of a run after a sequence, oldest first, read `page_size` at a time."""

    def record(self, run_id: str, record_id: str) -> RunRecord | None: ...

    def pointers(self, session_id: str, after_position: int) -> Iterator[Pointer]: ...

    def seed_records(self, run_id: str, attempt_id: str, after_id: int, through_id: int) -> Iterator[SeedRecord]:
        """An attempt's body records after one position through another, in order."""

    def purge(self, session_id: str, run_ids: list[str]) -> None:
        """Delete a reserved session's data, its seeds and preparations included
        (restartable), then mark it purged."""
