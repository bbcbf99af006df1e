"""Checks made before any state is read; each failure is a `ContractError`.

Messages and their order follow goa-ai (`storage.ValidateRunRecord`,
`session.ValidateRunStart`, `lifecycle.Validate*`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from cairn.runtime import codec
from cairn.runtime.errors import (
    ChildAgentIDRequiredError,
    ChildRunIDRequiredError,
    ChildSessionIDRequiredError,
    ContractError,
    ParentRunIDRequiredError,
    RunRecordOwnerMismatchError,
    wrap,
)
from cairn.runtime.model import (
    CANCELLATION_RECORD_TYPE,
    CHILD_RUN_LINKED,
    LIFECYCLE_TYPES,
    REASON_SESSION_ENDED,
    RUN_COMPLETED,
    RUN_STARTED,
    RunRecord,
    RunStart,
)

STARTED_PREFIX = "started record: "
CANCELLATION_PREFIX = "cancellation record: "
PARENT_LINK_PREFIX = "parent link record: "

T = TypeVar("T")


def is_millisecond(moment: datetime) -> bool:
    return moment.microsecond % 1000 == 0


def fail(message: str) -> ContractError:
    return ContractError(message)


def validate_run_record(record: RunRecord | None) -> None:
    if record is None:
        raise fail("run record is required")
    for value, message in (
        (record.run_id, "run id is required"),
        (record.agent_id, "agent id is required"),
        (record.event_key, "event key is required"),
        (record.type, "record type is required"),
        (record.payload, "record payload is required"),
        (record.timestamp, "record timestamp is required"),
    ):
        if not value:
            raise fail(message)
    if not is_millisecond(record.timestamp):
        raise fail("record timestamp must use millisecond precision")


def validate_ordinary_run_record(record: RunRecord | None) -> None:
    validate_run_record(record)
    assert record is not None
    if record.type in LIFECYCLE_TYPES:
        raise fail(f'record type "{record.type}" requires a lifecycle operation')


def validate_digest(digest: bytes) -> None:
    if not digest or not any(digest):
        raise fail("accepted request digest is required")


def validate_run_start(run: RunStart, *, child: bool) -> None:
    """`session.ValidateRunStart` for sessionful root and child starts."""
    if child:
        for value, sentinel in (
            (run.run_id, ChildRunIDRequiredError),
            (run.agent_id, ChildAgentIDRequiredError),
            (run.session_id, ChildSessionIDRequiredError),
            (run.parent_run_id, ParentRunIDRequiredError),
        ):
            if not value:
                raise wrap(sentinel())
    else:
        for value, message in (
            (run.run_id, "run id is required"),
            (run.agent_id, "agent id is required"),
            (run.session_id, "session id is required"),
        ):
            if not value:
                raise fail(message)
        if run.parent_run_id:
            raise fail("root run cannot have parent run id")
    _validate_common(run)


def validate_one_shot_start(run: RunStart, *, child: bool) -> None:
    if not run.run_id:
        raise fail("run id is required")
    if not run.agent_id:
        raise fail("agent id is required")
    if run.session_id:
        raise fail("one-shot run cannot have session id")
    if child and not run.parent_run_id:
        raise wrap(ParentRunIDRequiredError())
    if not child and run.parent_run_id:
        raise fail("one-shot run cannot have parent run id")
    if run.predecessor_run_id:
        raise fail("one-shot run cannot have predecessor run id")
    _validate_common(run)


def _validate_common(run: RunStart) -> None:
    if run.predecessor_run_id and run.predecessor_run_id == run.run_id:
        raise fail("predecessor run id must differ from run id")
    if not run.started_at:
        raise fail("started_at is required")
    if not is_millisecond(run.started_at):
        raise fail("started_at must use millisecond precision")


def check_owner(record: RunRecord, run_id: str, agent_id: str, session_id: str, prefix: str = "") -> None:
    if record.run_id != run_id or record.agent_id != agent_id or record.session_id != session_id:
        raise wrap(RunRecordOwnerMismatchError(), prefix)


def _typed_record(record: RunRecord | None, record_type: str, decoder: Callable[[bytes], T]) -> tuple[RunRecord, T]:
    """A well-formed record of `record_type`, and its strictly decoded payload."""
    validate_run_record(record)
    assert record is not None  # refused above
    if record.type != record_type:
        raise fail(f'record has type "{record.type}", want "{record_type}"')
    return record, decode(decoder, record.payload)


def validate_started_record(run: RunStart, record: RunRecord | None) -> None:
    try:
        record, started = _typed_record(record, RUN_STARTED, codec.decode_run_started)
        check_owner(record, run.run_id, run.agent_id, run.session_id)
        if record.timestamp != run.started_at:
            raise fail("timestamp does not match run start")
        if started.parent_run_id != run.parent_run_id:
            raise fail("parent run id does not match run")
        if started.predecessor_run_id != run.predecessor_run_id:
            raise fail("predecessor run id does not match run")
        if started.labels != (run.labels or {}):
            raise fail("labels do not match run")
    except ContractError as error:
        raise wrap(error, STARTED_PREFIX) from None


def validate_cancellation_record(run: RunStart, record: RunRecord | None) -> None:
    """What an ended session's start stores: a `session_ended` intent, or (older runtimes) a canceled completion."""
    try:
        if record is None:
            raise fail("cancellation record is required")
        validate_run_record(record)
        if record.timestamp != run.started_at:
            raise fail("timestamp does not match run start")
        if record.type == RUN_COMPLETED:
            # The shape goa-ai sent up to 0ac5b037 (and the seed document describes):
            # the run ends canceled at its start instead of recording an intent.
            completed = decode(codec.decode_run_completed, record.payload)
            if completed.status != "canceled" or completed.cancellation_reason != REASON_SESSION_ENDED:
                raise fail(f'canceled run completion must carry reason "{REASON_SESSION_ENDED}"')
        elif record.type != CANCELLATION_RECORD_TYPE:
            raise fail(f'record has type "{record.type}", want "{CANCELLATION_RECORD_TYPE}"')
        elif decode(codec.decode_cancellation_reason, record.payload) != REASON_SESSION_ENDED:
            raise fail(f'cancellation reason must be "{REASON_SESSION_ENDED}"')
        check_owner(record, run.run_id, run.agent_id, run.session_id)
    except ContractError as error:
        raise wrap(error, CANCELLATION_PREFIX) from None


def validate_parent_link(run: RunStart, record: RunRecord | None) -> codec.ChildRunLinked:
    try:
        record, link = _typed_record(record, CHILD_RUN_LINKED, codec.decode_child_run_linked)
        if record.run_id != run.parent_run_id or record.session_id != run.session_id:
            raise fail("parent identity does not match child run")
        if link.child_run_id != run.run_id or link.child_agent_id != run.agent_id:
            raise fail("child identity does not match run")
        if not link.tool_name or not link.tool_call_id:
            raise fail("parent tool name and call id are required")
        return link
    except ContractError as error:
        raise wrap(error, PARENT_LINK_PREFIX) from None


def validate_distinct_keys(first: RunRecord, second: RunRecord | None, message: str) -> None:
    if second is not None and first.event_key == second.event_key:
        raise fail(message)


def decode(decoder: Callable[[bytes], T], payload: bytes) -> T:
    """Run a strict decoder, turning payload errors into contract errors."""
    try:
        return decoder(payload)
    except codec.PayloadError as error:
        raise fail(str(error)) from None
