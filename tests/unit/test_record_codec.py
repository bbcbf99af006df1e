"""Strict decoding of the lifecycle records the runtime store validates
(goa-ai `hooks/codec_utf8_test.go`): text kept exactly, malformed payloads refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cairn.runtime.codec import (
    PayloadError,
    decode_cancellation_reason,
    decode_child_run_linked,
    decode_run_completed,
    decode_run_started,
    decode_run_suspended,
)

MARK = "record-text"

# Each record kind with MARK in a retained field, and how to read that field back.
RECORDS: dict[str, tuple[dict[str, Any], Callable[[bytes], str]]] = {
    "run_started": ({"labels": {"text": MARK}}, lambda p: decode_run_started(p).labels["text"]),
    "run_suspended": (
        {"SuspensionID": MARK, "Version": "v1", "PendingCount": 1, "RequiredTools": None},
        lambda p: decode_run_suspended(p).suspension_id,
    ),
    "run_completed": (
        {
            "status": "failed",
            "phase": "failed",
            "failure": {"message": MARK, "kind": "execution_failed", "retryable": False},
        },
        lambda p: decode_run_completed(p).failure["message"],
    ),
    "child_run_linked": (
        {"ToolName": "tools.child", "ToolCallID": MARK, "ChildRunID": "child", "ChildAgentID": "child-agent"},
        lambda p: decode_child_run_linked(p).tool_call_id,
    ),
}


def payload_with(kind: str, quoted: bytes) -> bytes:
    body, _ = RECORDS[kind]
    return json.dumps(body, separators=(",", ":")).encode().replace(json.dumps(MARK).encode(), quoted)


@pytest.mark.parametrize("kind", RECORDS)
@pytest.mark.parametrize(
    ("quoted", "text"),
    [
        ('"plain text"', "plain text"),
        ('"éΩ雪🙂"', "éΩ雪🙂"),
        ('"\\u00e9\\u03a9\\u96ea\\ud83d\\ude42"', "éΩ雪🙂"),
        ('"\ufffd"', "\ufffd"),
        ('"\\ufffd"', "\ufffd"),
        ('"é e\\u0301"', "é e\u0301"),
        ('"\\u0000\\b\\f\\n\\r\\t\\/\\\\\\""', '\x00\b\f\n\r\t/\\"'),
        ('"\\ud800"', "\ufffd"),
        ('"\\udc00\\ud800"', "\ufffd\ufffd"),
        ('"\\ud800\\ud83d\\ude42"', "\ufffd🙂"),
    ],
)
def test_strict_decoding_preserves_text(kind: str, quoted: str, text: str):
    _, read = RECORDS[kind]
    assert read(payload_with(kind, quoted.encode())) == text


@pytest.mark.parametrize("kind", RECORDS)
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.replace(MARK.encode(), b"\xff"), "record payload contains invalid UTF-8"),
        (lambda p: p.replace(MARK.encode(), b"\x80"), "record payload contains invalid UTF-8"),
        (lambda p: p.replace(MARK.encode(), b"\xe2\x82"), "record payload contains invalid UTF-8"),
        (lambda p: p.replace(MARK.encode(), b"\xc0\xaf"), "record payload contains invalid UTF-8"),
        (lambda p: p.replace(MARK.encode(), b"\xed\xa0\x80"), "record payload contains invalid UTF-8"),
        (lambda p: p.replace(MARK.encode(), b"\xf4\x90\x80\x80"), "record payload contains invalid UTF-8"),
        (lambda p: b"null", "record payload must not be null"),
        (lambda p: p[:-1] + b',"unknown":true}', 'unknown field "unknown"'),
        (lambda p: p + b" {}", "multiple JSON values"),
        (lambda p: p + b" !", "invalid character"),
        (lambda p: p[:-1] + b',"n":' + b"1" * 5000 + b"}", "out of range"),
        (lambda p: p + b" " + b"1" * 5000, "invalid character"),
    ],
    ids=[
        "invalid byte",
        "isolated continuation",
        "truncated",
        "overlong",
        "encoded surrogate",
        "above range",
        "null",
        "unknown field",
        "trailing value",
        "trailing malformed JSON",
        "integer of 5,000 digits",
        "trailing integer of 5,000 digits",
    ],
)
def test_strict_decoding_rejects_malformed_payloads(kind: str, make: Callable[[bytes], bytes], message: str):
    _, read = RECORDS[kind]
    payload = make(payload_with(kind, json.dumps(MARK).encode()))
    original = bytes(payload)
    with pytest.raises(PayloadError, match=message):
        read(payload)
    assert payload == original


def test_a_cancellation_intent_holding_a_number_past_range_is_refused():
    assert decode_cancellation_reason(b'{"reason": "session_ended", "n": 1}') == "session_ended"
    with pytest.raises(PayloadError, match="out of range"):
        decode_cancellation_reason(b'{"reason": "session_ended", "n": ' + b"9" * 5000 + b"}")
