"""Commands, results and stored shapes of the runtime store contract.

Field names are goa-ai's, in snake_case. Times are timezone-aware UTC
datetimes with millisecond precision; payloads and checkpoints are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from cairn import jsontext

CANCELLATION_RECORD_TYPE = "runtime.cancellation_intent"
RUN_STARTED = "run_started"
RUN_COMPLETED = "run_completed"
RUN_SUSPENDED = "run_suspended"
CHILD_RUN_LINKED = "child_run_linked"
TRANSCRIPT_SEEDED = "transcript_messages_seeded"
TRANSCRIPT_APPENDED = "transcript_messages_appended"
LIFECYCLE_TYPES = frozenset({RUN_STARTED, CHILD_RUN_LINKED, CANCELLATION_RECORD_TYPE, RUN_SUSPENDED, RUN_COMPLETED})
TRANSCRIPT_TYPES = frozenset({TRANSCRIPT_SEEDED, TRANSCRIPT_APPENDED})

REASON_SESSION_ENDED = "session_ended"
REASON_ENGINE_CANCELED = "engine_canceled"

MAX_TRANSCRIPT_PAGE_RECORDS = 512
MAX_TRANSCRIPT_PAGE_BYTES = 1_048_576


class SessionStatus(StrEnum):
    ACTIVE = "active"
    ENDED = "ended"


class RunStatus(StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def is_terminal(self) -> bool:
        """Suspended counts as terminal: the workflow ended, a new run continues it."""
        return self is not RunStatus.RUNNING


class RunStartOutcome(StrEnum):
    PROCEED = "proceed"
    STOP = "stop"


class RunRepairOutcome(StrEnum):
    STORED = "stored"
    ALREADY_STORED = "already_stored"
    DIFFERENT_TERMINAL = "different_terminal"


@dataclass(frozen=True)
class Session:
    id: str
    status: SessionStatus
    created_at: datetime
    ended_at: datetime | None = None


@dataclass(frozen=True)
class RunStart:
    """The immutable start identity of a run."""

    agent_id: str
    run_id: str
    started_at: datetime
    seed_end_id: str = ""
    session_id: str = ""
    parent_run_id: str = ""
    predecessor_run_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunMeta:
    agent_id: str
    run_id: str
    status: RunStatus
    start_outcome: RunStartOutcome
    started_at: datetime
    updated_at: datetime
    seed_end_id: str = ""
    session_id: str = ""
    parent_run_id: str = ""
    successor_run_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    cancellation_reason: str = ""


@dataclass(frozen=True)
class RunRecord:
    """A run log event; `id` is assigned by the store (a decimal string)."""

    event_key: str
    run_id: str
    agent_id: str
    type: str
    payload: bytes
    timestamp: datetime
    session_id: str = ""
    turn_id: str = ""
    id: str = ""

    def same_content(self, other: RunRecord) -> bool:
        """goa-ai's `sameEvent`: everything but the id, timestamp exact."""
        return (
            self.event_key == other.event_key
            and self.run_id == other.run_id
            and self.agent_id == other.agent_id
            and self.session_id == other.session_id
            and self.turn_id == other.turn_id
            and self.type == other.type
            and self.timestamp == other.timestamp
            and self.payload == other.payload
        )


@dataclass(frozen=True)
class RunSuspension:
    """A checkpoint: `data` is opaque and kept byte for byte."""

    id: str
    data: bytes


@dataclass(frozen=True)
class AppendResult:
    id: str = ""
    inserted: bool = False
    session_status: str = ""


@dataclass(frozen=True)
class RootRunStart:
    request_digest: bytes
    run: RunStart
    started: RunRecord
    cancellation: RunRecord | None = None


@dataclass(frozen=True)
class ChildRunStart:
    request_digest: bytes
    run: RunStart
    parent_linked: RunRecord
    started: RunRecord
    cancellation: RunRecord | None = None


@dataclass(frozen=True)
class OneShotRunStart:
    request_digest: bytes
    run: RunStart
    started: RunRecord


@dataclass(frozen=True)
class OneShotChildRunStart:
    request_digest: bytes
    run: RunStart
    parent_linked: RunRecord
    started: RunRecord


@dataclass(frozen=True)
class SynchronousRunStart:
    """A sessionless root started by a synchronous caller: no request digest, the exact command repeats."""

    run: RunStart
    started: RunRecord


@dataclass(frozen=True)
class RunCancellation:
    run_id: str
    reason: str
    record: RunRecord


@dataclass(frozen=True)
class RunSuspensionCommand:
    """goa-ai's `storage.RunSuspension` command (the checkpoint type owns the plain name)."""

    run_id: str
    suspension: RunSuspension
    record: RunRecord


@dataclass(frozen=True)
class RunTerminal:
    run_id: str
    status: RunStatus
    record: RunRecord


@dataclass(frozen=True)
class RootRunStartResult:
    outcome: RunStartOutcome
    run_status: RunStatus
    started: AppendResult
    cancellation: AppendResult = AppendResult()


@dataclass(frozen=True)
class ChildRunStartResult:
    outcome: RunStartOutcome
    run_status: RunStatus
    parent_record: AppendResult
    started: AppendResult
    cancellation: AppendResult = AppendResult()


@dataclass(frozen=True)
class OneShotRunStartResult:
    run_status: RunStatus
    record: AppendResult


@dataclass(frozen=True)
class OneShotChildRunStartResult:
    run_status: RunStatus
    parent_record: AppendResult
    started: AppendResult


@dataclass(frozen=True)
class RunRepairResult:
    outcome: RunRepairOutcome
    status: RunStatus
    record: AppendResult = AppendResult()


@dataclass(frozen=True)
class RunRecordPage:
    events: list[RunRecord]
    next_cursor: str = ""


# -- initial history ("seeds") and preparations -----------------------------------

# A page of run records stops before they pass this as Lambda carries them (`record_answer_bytes`), so
# every page fits a Lambda answer; a page always holds its first record.
MAX_RECORD_PAGE_BYTES = 4_000_000
# A record's field names, timestamp and punctuation in an answer.
_RECORD_FRAME_BYTES = 200


def record_answer_bytes(record: RunRecord) -> int:
    """What a record takes in a page's answer: its payload as base64, its texts escaped as Lambda carries
    them (a control character in a type is 7 bytes there)."""
    texts = [record.event_key, record.run_id, record.agent_id, record.type, record.session_id, record.turn_id]
    escaped = jsontext.value_sent_size([*texts, record.id])
    return -(-len(record.payload) // 3) * 4 + escaped + _RECORD_FRAME_BYTES


EMPTY_SEED_END_ID = "0"
MAX_SEED_COMMAND_BYTES = 1_000_000
# One append's limit plus page framing and two assigned 19-digit positions, less a run id.
MAX_SEED_PAGE_BYTES = MAX_SEED_COMMAND_BYTES + 8 + 2 * len("9223372036854775807") - 1
MAX_SEED_PAGE_RECORDS = 512


class SeedKind(StrEnum):
    LITERAL = "literal"
    NEXT_TURN = "next_turn"
    CONTINUATION = "continuation"


@dataclass(frozen=True)
class PromptScope:
    session_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RenderedPrompt:
    """goa-ai's `prompt.RenderEvent`: a prompt already rendered into a literal."""

    prompt_id: str
    version: str = ""
    scope: PromptScope = PromptScope()


@dataclass(frozen=True)
class SeedDeclaration:
    """Owner and source of one run's initial history, fixed before its first record."""

    agent_id: str
    run_id: str
    command_id: str
    attempt_id: str
    kind: SeedKind
    session_id: str = ""
    source_run_id: str = ""
    source_end_id: str = ""
    exclude_reasoning: bool = False
    rendered_prompts: list[RenderedPrompt] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryPrefix:
    """A saved run's history through an exact committed record."""

    run_id: str
    end_id: str
    exclude_system: bool = False
    exclude_reasoning: bool = False


@dataclass(frozen=True)
class RunSeed:
    declaration: SeedDeclaration
    end_id: str
    source: HistoryPrefix | None = None


@dataclass(frozen=True)
class LiteralPart:
    """Consecutive bytes of one literal whose encoding spans records; `final` closes it."""

    data: bytes
    final: bool


@dataclass(frozen=True)
class SeedRecord:
    """Exactly one of a whole literal (`messages`), a literal part, the prefix or prepared bytes."""

    key: str
    previous_id: str
    id: str = ""
    messages: bytes = b""
    literal_part: LiteralPart | None = None
    prefix: HistoryPrefix | None = None
    prepared: bytes = b""


@dataclass(frozen=True)
class SeedAppend:
    run_id: str
    attempt_id: str
    record: SeedRecord


@dataclass(frozen=True)
class SeedPublication:
    run_id: str
    attempt_id: str
    seed_end_id: str
    end_id: str
    prepared_bytes: int


@dataclass(frozen=True)
class SeedPage:
    records: list[SeedRecord]
    next_cursor: str = ""


@dataclass(frozen=True)
class PreparationOperation:
    """The original command a prepared body belongs to."""

    agent_id: str
    run_id: str
    command_id: str
    session_id: str = ""


@dataclass(frozen=True)
class PreparationAttempt:
    operation: PreparationOperation
    attempt_id: str


@dataclass(frozen=True)
class RunPreparation:
    """The accepted body: its history (`seed`), its end and the compiled start's length."""

    seed: RunSeed
    end_id: str
    prepared_bytes: int
