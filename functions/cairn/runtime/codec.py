"""Strict decoding of the lifecycle payloads the store must validate.

`run_started`, `run_completed`, `run_suspended` and `child_run_linked` must
be exactly one JSON object of the documented shape: unknown fields, a second
value, `null` and invalid UTF-8 are rejected with goa-ai's messages. The
payload bytes themselves are stored untouched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cairn import jsontext

INVALID_UTF8 = "record payload contains invalid UTF-8"
NULL_PAYLOAD = "record payload must not be null"
# Python converts integers of at most 4,300 digits; anything longer is past Go's float64 as well.
_OUT_OF_RANGE = "a number in the record payload is out of range"


class PayloadError(ValueError):
    """The payload is not the typed JSON value its record type requires."""


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _string_map(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


def _string_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: Any) -> bool:
    return value is None or isinstance(value, dict)


Shape = dict[str, Callable[[Any], bool]]

RUN_STARTED_SHAPE: Shape = {"parent_run_id": _string, "predecessor_run_id": _string, "labels": _string_map}
RUN_COMPLETED_SHAPE: Shape = {
    "status": _string,
    "phase": _string,
    "failure": _object,
    "cancellation": _object,
    "labels": _string_map,
}
FAILURE_SHAPE: Shape = {
    "message": _string,
    "debug_message": _string,
    "provider": _string,
    "operation": _string,
    "kind": _string,
    "code": _string,
    "http_status": _integer,
    "retryable": lambda value: isinstance(value, bool),
}
CANCELLATION_SHAPE: Shape = {"reason": _string}
RUN_SUSPENDED_SHAPE: Shape = {
    "SuspensionID": _string,
    "Version": _string,
    "PendingCount": _integer,
    "RequiredTools": _string_list,
}
CHILD_RUN_LINKED_SHAPE: Shape = {
    "ToolName": _string,
    "ToolCallID": _string,
    "ChildRunID": _string,
    "ChildAgentID": _string,
}


def decode_text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PayloadError(INVALID_UTF8) from error


def shallow_text(payload: bytes) -> str:
    """The payload's text, refused when it nests deeper than `jsontext.MAX_DEPTH`.

    Python's decoder recurses once per level; refused before decoding, a deep
    payload is a contract error whatever the depth of the caller's stack.
    """
    text = decode_text(payload)
    if jsontext.nests_too_deeply(text):
        raise PayloadError(f"record payload nests deeper than {jsontext.MAX_DEPTH} levels")
    return text


def decode_one_value(payload: bytes) -> Any:
    """Exactly one JSON value, as Go's decoder with `More()` checks it."""
    text = shallow_text(payload)
    decoder = json.JSONDecoder()
    try:
        value, end = decoder.raw_decode(text, _skip_space(text, 0))
    except json.JSONDecodeError as error:
        raise PayloadError(f"invalid character: {error.msg}") from error
    except ValueError as error:  # an integer of more digits than Python converts, past Go's float64 too
        raise PayloadError(_OUT_OF_RANGE) from error
    rest = _skip_space(text, end)
    if rest < len(text):
        try:
            decoder.raw_decode(text, rest)
        except ValueError as error:  # JSONDecodeError, or a too-long integer: no second value either way
            raise PayloadError(f"invalid character {text[rest]!r} after top-level value") from error
        raise PayloadError("multiple JSON values")
    return go_text(value)


def go_text(value: Any) -> Any:
    """The decoded value with each unpaired UTF-16 surrogate escape read as U+FFFD.

    Python's decoder keeps `\\ud800` as a lone surrogate code point; Go's reads
    it as the replacement character. Paired escapes are already one code point
    here, and raw UTF-8 surrogates never get this far (invalid UTF-8), so every
    surrogate left came from an unpaired escape.
    """
    if isinstance(value, str):
        return jsontext.valid_text(value)
    if isinstance(value, dict):
        return {go_text(name): go_text(item) for name, item in value.items()}
    if isinstance(value, list):
        return [go_text(item) for item in value]
    return value


def decode_strict(payload: bytes, shape: Shape) -> dict[str, Any]:
    value = decode_one_value(payload)
    if value is None:
        raise PayloadError(NULL_PAYLOAD)
    return check_shape(value, shape)


def check_shape(value: Any, shape: Shape) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PayloadError(f"json: cannot unmarshal {type(value).__name__} into an object")
    for name, item in value.items():
        if name not in shape:
            raise PayloadError(f'json: unknown field "{name}"')
        if not shape[name](item):
            raise PayloadError(f'json: cannot unmarshal field "{name}"')
    return value


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


@dataclass(frozen=True)
class RunStarted:
    parent_run_id: str = ""
    predecessor_run_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunCompleted:
    status: str
    phase: str
    failure: dict[str, Any] | None
    cancellation_reason: str | None
    labels: dict[str, str]


@dataclass(frozen=True)
class RunSuspended:
    suspension_id: str


@dataclass(frozen=True)
class ChildRunLinked:
    tool_name: str
    tool_call_id: str
    child_run_id: str
    child_agent_id: str


def decode_run_started(payload: bytes) -> RunStarted:
    value = decode_strict(payload, RUN_STARTED_SHAPE)
    return RunStarted(
        parent_run_id=value.get("parent_run_id", ""),
        predecessor_run_id=value.get("predecessor_run_id", ""),
        labels=value.get("labels") or {},
    )


def decode_run_completed(payload: bytes) -> RunCompleted:
    value = decode_strict(payload, RUN_COMPLETED_SHAPE)
    failure = value.get("failure")
    cancellation = value.get("cancellation")
    if failure is not None:
        check_shape(failure, FAILURE_SHAPE)
    if cancellation is not None:
        check_shape(cancellation, CANCELLATION_SHAPE)
    status = value.get("status", "")
    if status == "success":
        if failure is not None or cancellation is not None:
            raise PayloadError("successful run completion cannot carry a failure or cancellation")
    elif status == "failed":
        if not failure or not failure.get("message") or not failure.get("kind") or cancellation is not None:
            raise PayloadError("failed run completion requires a failure message and kind")
    elif status == "canceled":
        if not cancellation or not cancellation.get("reason") or failure is not None:
            raise PayloadError("canceled run completion requires a cancellation reason")
    else:
        raise PayloadError(f'unexpected run completion status "{status}"')
    return RunCompleted(
        status=status,
        phase=value.get("phase", ""),
        failure=failure,
        cancellation_reason=cancellation.get("reason") if cancellation else None,
        labels=value.get("labels") or {},
    )


def decode_run_suspended(payload: bytes) -> RunSuspended:
    value = decode_strict(payload, RUN_SUSPENDED_SHAPE)
    return RunSuspended(suspension_id=value.get("SuspensionID", ""))


def decode_child_run_linked(payload: bytes) -> ChildRunLinked:
    value = decode_strict(payload, CHILD_RUN_LINKED_SHAPE)
    return ChildRunLinked(
        tool_name=value.get("ToolName", ""),
        tool_call_id=value.get("ToolCallID", ""),
        child_run_id=value.get("ChildRunID", ""),
        child_agent_id=value.get("ChildAgentID", ""),
    )


def decode_cancellation_reason(payload: bytes) -> str:
    """The intent record is decoded leniently: only `reason` matters."""
    try:
        value = go_text(json.loads(shallow_text(payload)))
    except json.JSONDecodeError as error:
        raise PayloadError(f"invalid cancellation intent: {error.msg}") from error
    except ValueError as error:
        raise PayloadError(f"invalid cancellation intent: {_OUT_OF_RANGE}") from error
    reason = value.get("reason") if isinstance(value, dict) else None
    return reason if isinstance(reason, str) else ""
