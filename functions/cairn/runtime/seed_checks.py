"""Checks on seed and preparation commands made before any state is read.

Messages follow goa-ai (`storage.ValidateSeedDeclaration`,
`ValidateSeedAppend`, `ValidatePreparationOperation`). The size limits are
on the command as goa-ai's Go runtime encodes it (`json.Marshal` of the Go
struct), so `go_json` spells that encoding out: Go field names, HTML-safe
string escapes, base64 bytes, `null` for empty bytes and lists, raw literal
messages compacted.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from cairn import jsontext
from cairn.runtime.model import (
    MAX_SEED_COMMAND_BYTES,
    MAX_SEED_PAGE_BYTES,
    HistoryPrefix,
    PreparationAttempt,
    PreparationOperation,
    RenderedPrompt,
    SeedAppend,
    SeedDeclaration,
    SeedKind,
    SeedPage,
    SeedRecord,
)
from cairn.runtime.validation import fail

# -- Go's encoding ------------------------------------------------------------------

_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_GO_SPECIAL = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029\ud800-\udfff]')
# Outside strings, whitespace is dropped; a string token is kept whole.
_RAW_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[ \t\r\n]+', re.DOTALL)
_RAW_HTML = {
    b"<": b"\\u003c",
    b">": b"\\u003e",
    b"&": b"\\u0026",
    "\u2028".encode(): b"\\u2028",
    "\u2029".encode(): b"\\u2029",
}


def _go_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _GO_ESCAPES:
        return _GO_ESCAPES[char]
    if "\ud800" <= char <= "\udfff":
        return "\\ufffd"
    return f"\\u{ord(char):04x}"


def go_string(text: str) -> bytes:
    return ('"' + _GO_SPECIAL.sub(_go_escape, text) + '"').encode()


def go_bytes(data: bytes) -> bytes:
    return b'"' + base64.b64encode(data) + b'"' if data else b"null"


def go_raw(data: bytes) -> bytes:
    """A `json.RawMessage` as Go's encoder writes it: compacted, HTML characters escaped."""
    if not data:
        return b"null"
    compact = _RAW_TOKEN.sub(lambda match: match.group() if match.group().startswith(b'"') else b"", data)
    for char, escaped in _RAW_HTML.items():
        compact = compact.replace(char, escaped)
    return compact


def _go_object(fields: list[tuple[str, bytes]]) -> bytes:
    return b"{" + b",".join(go_string(name) + b":" + value for name, value in fields) + b"}"


def _go_bool(value: bool) -> bytes:
    return b"true" if value else b"false"


def _go_prefix(prefix: HistoryPrefix | None) -> bytes:
    if prefix is None:
        return b"null"
    return _go_object(
        [
            ("RunID", go_string(prefix.run_id)),
            ("EndID", go_string(prefix.end_id)),
            ("ExcludeSystem", _go_bool(prefix.exclude_system)),
            ("ExcludeReasoning", _go_bool(prefix.exclude_reasoning)),
        ]
    )


def _go_prompt(prompt: RenderedPrompt) -> bytes:
    labels = prompt.scope.labels
    encoded_labels = _go_object([(name, go_string(labels[name])) for name in sorted(labels)]) if labels else b"null"
    scope = _go_object([("SessionID", go_string(prompt.scope.session_id)), ("Labels", encoded_labels)])
    return _go_object(
        [("PromptID", go_string(prompt.prompt_id)), ("Version", go_string(prompt.version)), ("Scope", scope)]
    )


def go_declaration(declaration: SeedDeclaration) -> bytes:
    prompts = declaration.rendered_prompts
    return _go_object(
        [
            ("AgentID", go_string(declaration.agent_id)),
            ("RunID", go_string(declaration.run_id)),
            ("SessionID", go_string(declaration.session_id)),
            ("CommandID", go_string(declaration.command_id)),
            ("AttemptID", go_string(declaration.attempt_id)),
            ("Kind", go_string(str(declaration.kind))),
            ("SourceRunID", go_string(declaration.source_run_id)),
            ("SourceEndID", go_string(declaration.source_end_id)),
            ("ExcludeReasoning", _go_bool(declaration.exclude_reasoning)),
            ("RenderedPrompts", b"[" + b",".join(map(_go_prompt, prompts)) + b"]" if prompts else b"null"),
        ]
    )


def go_record(record: SeedRecord) -> bytes:
    fields = [
        ("ID", go_string(record.id)),
        ("Key", go_string(record.key)),
        ("PreviousID", go_string(record.previous_id)),
        ("Messages", go_raw(record.messages)),
    ]
    if record.literal_part is not None:
        part = record.literal_part
        fields.append(("literal_part", _go_object([("Data", go_bytes(part.data)), ("Final", _go_bool(part.final))])))
    fields += [("Prefix", _go_prefix(record.prefix)), ("Prepared", go_bytes(record.prepared))]
    return _go_object(fields)


def go_append(command: SeedAppend) -> bytes:
    return _go_object(
        [
            ("RunID", go_string(command.run_id)),
            ("AttemptID", go_string(command.attempt_id)),
            ("Record", go_record(command.record)),
        ]
    )


def go_page(page: SeedPage) -> bytes:
    records = b"[" + b",".join(map(go_record, page.records)) + b"]" if page.records else b"null"
    return _go_object([("Records", records), ("NextCursor", go_string(page.next_cursor))])


# -- validation ----------------------------------------------------------------------


def _command_size(encoded: bytes) -> None:
    if len(encoded) > MAX_SEED_COMMAND_BYTES:
        raise fail(f"seed command size {len(encoded)} exceeds {MAX_SEED_COMMAND_BYTES} bytes")


def page_bytes(records_bytes: int, count: int, cursor: str) -> int:
    """`len(go_page(...))` of `count` records encoded in `records_bytes`, without encoding the page again."""
    return len(b'{"Records":[],"NextCursor":}') + records_bytes + max(count - 1, 0) + len(go_string(cursor))


def answered_bytes(record: SeedRecord, go_size: int) -> int:
    """At most what a record of `go_size` bytes as Go writes it takes in an answer, where its literal
    travels as base64 of the bytes as sent rather than compacted."""
    return go_size + -(-len(record.messages) // 3) * 4


def page_size_error(page: SeedPage) -> str | None:
    """Why `page` is over the page limit, or None."""
    size = len(go_page(page))
    return f"seed page size {size} exceeds {MAX_SEED_PAGE_BYTES} bytes" if size > MAX_SEED_PAGE_BYTES else None


def validate_declaration(declaration: SeedDeclaration) -> None:
    d = declaration
    if not (d.agent_id and d.run_id and d.command_id and d.attempt_id):
        raise fail("preparation agent, run, command and attempt IDs are required")
    if d.kind == SeedKind.LITERAL:
        if d.source_run_id or d.source_end_id or d.exclude_reasoning:
            raise fail("literal seed cannot declare a source or source transform")
    else:
        if not d.session_id or not d.source_run_id or d.source_run_id == d.run_id:
            raise fail("referenced history requires a session and a distinct source run")
        if d.kind == SeedKind.NEXT_TURN and d.source_end_id:
            raise fail("completed source position is assigned by the store")
        if d.kind == SeedKind.CONTINUATION and (not d.source_end_id or d.exclude_reasoning):
            raise fail("continuation requires its exact saved position and preserves reasoning")
    _command_size(go_declaration(d))


def validate_append(command: SeedAppend) -> None:
    record = command.record
    if not command.run_id or not command.attempt_id or record.id or not record.key or not record.previous_id:
        raise fail("preparation append requires run, attempt, key and previous position, with no assigned ID")
    part = record.literal_part
    if part is not None and not part.data:
        raise fail("literal part requires nonempty data")
    variants = sum((bool(record.messages), record.prefix is not None, bool(record.prepared), part is not None))
    if variants != 1:
        raise fail(
            "preparation record requires exactly one complete literal, literal fragment, history prefix or "
            "compiled-start part"
        )
    if record.messages and not _valid_json(record.messages):
        raise fail("seed literal is not valid JSON")
    # Go's encoder compacts the literal; it is kept and answered as sent, so it is bounded as sent too.
    if len(record.messages) > MAX_SEED_COMMAND_BYTES:
        raise fail(f"seed literal size {len(record.messages)} exceeds {MAX_SEED_COMMAND_BYTES} bytes")
    _command_size(go_append(command))


def _valid_json(data: bytes) -> bool:
    """Whether `data` is valid JSON nesting no deeper than `jsontext.MAX_DEPTH`.

    Python's decoder recurses once per level, so deeper text is refused before
    it is decoded, with the contract's invalid-JSON error, whatever the stack.
    """

    def refuse(name: str) -> Any:
        raise ValueError(name)

    if jsontext.nests_too_deeply(data.decode("utf-8", "replace")):
        return False
    try:
        json.loads(data, parse_constant=refuse)
    except ValueError:
        return False
    return True


def validate_operation(operation: PreparationOperation) -> None:
    if not (operation.agent_id and operation.run_id and operation.command_id):
        raise fail("preparation agent, run and command IDs are required")


def validate_attempt(attempt: PreparationAttempt) -> None:
    validate_operation(attempt.operation)
    if not attempt.attempt_id:
        raise fail("preparation attempt ID is required")
