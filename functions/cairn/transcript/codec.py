"""The canonical JSON of messages, both ways, as goa-ai's Go codec has it.

A message is exactly `{"role", "parts", "meta"}`; a part is a `kind` plus
exactly its documented keys, written in Go's field order. Unknown keys and
kinds are refused with Go's messages, `null` reads as Go's zero value, and
the rules a part must satisfy are checked both when reading and when
writing, so nothing is stored that could not be read back. Encoding a
decoded canonical message reproduces its bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

from cairn.transcript import exactjson
from cairn.transcript.errors import MessageFormatError
from cairn.transcript.model import (
    PART_TYPES,
    CacheCheckpointPart,
    Citation,
    CitationLocation,
    CitationsPart,
    DocumentPart,
    DocumentRange,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True)
class _Codec:
    """How one JSON field is read (`null` as Go's zero value) and written."""

    read: Callable[[Any, str], Any]
    write: Callable[[Any, str], str]


def _wrong(where: str, expected: str) -> MessageFormatError:
    return MessageFormatError(f'json: field "{where}" must be {expected}')


def _read_text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _wrong(where, "a string")
    return value


def _write_text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _wrong(where, "a string")
    return exactjson.quote(value)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value in _INT64


def _read_int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if not _is_int(value):
        raise _wrong(where, "a 64-bit integer")
    return value


def _write_int(value: Any, where: str) -> str:
    if not _is_int(value):
        raise _wrong(where, "a 64-bit integer")
    return str(value)


def _read_flag(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _wrong(where, "true or false")
    return value


def _write_flag(value: Any, where: str) -> str:
    if not isinstance(value, bool):
        raise _wrong(where, "true or false")
    return "true" if value else "false"


def _read_bytes(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wrong(where, "base64 text")
    try:
        return exactjson.b64decode(value)
    except exactjson.JsonError as error:
        raise _wrong(where, "base64 text") from error


def _write_bytes(value: Any, where: str) -> str:
    if value is None:
        return "null"
    if not isinstance(value, bytes):
        raise _wrong(where, "bytes")
    return exactjson.quote(exactjson.b64encode(value))


def _read_texts(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _wrong(where, "an array of strings")
    return [_read_text(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _write_texts(value: Any, where: str) -> str:
    if value is None:
        return "null"
    if not isinstance(value, list):
        raise _wrong(where, "a list of strings")
    return "[" + ",".join(_write_text(item, f"{where}[{index}]") for index, item in enumerate(value)) + "]"


def _read_object(value: Any, where: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise _wrong(where, "an object")
    return value


def _json_writer(*, sort_keys: bool) -> Callable[[Any, str], str]:
    def write(value: Any, where: str) -> str:
        try:
            return exactjson.dumps(value, sort_keys=sort_keys)
        except exactjson.JsonError as error:
            raise MessageFormatError(f'field "{where}": {error}') from error

    return write


_TEXT = _Codec(_read_text, _write_text)
_INTEGER = _Codec(_read_int, _write_int)
_FLAG = _Codec(_read_flag, _write_flag)
_BYTES = _Codec(_read_bytes, _write_bytes)
_TEXTS = _Codec(_read_texts, _write_texts)
# Go holds these in maps and `any` (keys sorted when written) ...
_VALUE = _Codec(lambda value, where: value, _json_writer(sort_keys=True))
_OBJECT = _Codec(_read_object, _json_writer(sort_keys=True))
# ... but tool input as raw JSON, written back exactly as it came.
_RAW_OBJECT = _Codec(lambda value, where: value, _json_writer(sort_keys=False))

Fields = tuple[tuple[str, _Codec], ...]


def _read_fields(kind: type, fields: Fields, value: Any, where: str, *, also: tuple[str, ...] = ()) -> Any:
    if not isinstance(value, dict):
        raise MessageFormatError(f"{where}: expected JSON object" if where else "expected JSON object")
    names = {name for name, _ in fields}.union(also)
    unknown = sorted(key for key in value if key not in names)
    if unknown:
        prefix = f"{where}: " if where else ""
        raise MessageFormatError(f'{prefix}json: unknown field "{unknown[0]}"')
    return kind(**{name: codec.read(value.get(name), _path(where, name)) for name, codec in fields})


def _write_fields(fields: Fields, value: Any, where: str, *, head: str = "") -> str:
    written = [
        f"{exactjson.quote(name)}:{codec.write(getattr(value, name), _path(where, name))}" for name, codec in fields
    ]
    return "{" + ",".join([head, *written] if head else written) + "}"


def _path(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _struct(kind: type, fields: Fields, *, optional: bool) -> _Codec:
    """A nested object; an optional one is Go's pointer (`null` stays `None`)."""

    def read(value: Any, where: str) -> Any:
        if value is None:
            return None if optional else kind()
        return _read_fields(kind, fields, value, where)

    def write(value: Any, where: str) -> str:
        if value is None and optional:
            return "null"
        if not isinstance(value, kind):
            raise _wrong(where, f"a {kind.__name__}")
        return _write_fields(fields, value, where)

    return _Codec(read, write)


def _list_of(item: _Codec) -> _Codec:
    def read(value: Any, where: str) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise _wrong(where, "an array")
        return [item.read(entry, f"{where}[{index}]") for index, entry in enumerate(value)]

    def write(value: Any, where: str) -> str:
        if value is None:
            return "null"
        if not isinstance(value, list):
            raise _wrong(where, "a list")
        return "[" + ",".join(item.write(entry, f"{where}[{index}]") for index, entry in enumerate(value)) + "]"

    return _Codec(read, write)


_RANGE: Fields = (("document_index", _INTEGER), ("start", _INTEGER), ("end", _INTEGER))
_OPTIONAL_RANGE = _struct(DocumentRange, _RANGE, optional=True)
_LOCATION: Fields = (
    ("document_char", _OPTIONAL_RANGE),
    ("document_chunk", _OPTIONAL_RANGE),
    ("document_page", _OPTIONAL_RANGE),
)
_CITATION: Fields = (
    ("title", _TEXT),
    ("source", _TEXT),
    ("location", _struct(CitationLocation, _LOCATION, optional=False)),
    ("source_content", _TEXTS),
)

_PART_FIELDS: dict[type, Fields] = {
    ThinkingPart: (("text", _TEXT), ("signature", _TEXT), ("redacted", _BYTES), ("index", _INTEGER), ("final", _FLAG)),
    TextPart: (("text", _TEXT),),
    ImagePart: (("format", _TEXT), ("bytes", _BYTES)),
    DocumentPart: (
        ("name", _TEXT),
        ("format", _TEXT),
        ("bytes", _BYTES),
        ("text", _TEXT),
        ("chunks", _TEXTS),
        ("uri", _TEXT),
        ("context", _TEXT),
        ("cite", _FLAG),
    ),
    CitationsPart: (
        ("text", _TEXT),
        ("citations", _list_of(_struct(Citation, _CITATION, optional=False))),
    ),
    ToolUsePart: (("id", _TEXT), ("name", _TEXT), ("input", _RAW_OBJECT), ("thought_signature", _TEXT)),
    ToolResultPart: (("tool_use_id", _TEXT), ("content", _VALUE), ("is_error", _FLAG)),
    CacheCheckpointPart: (),
}


def check_part(part: Part) -> None:
    """The rules every stored part satisfies, with goa-ai's messages."""
    if isinstance(part, ImagePart):
        if not part.format or not part.bytes:
            raise MessageFormatError("ImagePart requires format and bytes")
    elif isinstance(part, DocumentPart):
        if not part.name:
            raise MessageFormatError("DocumentPart requires Name")
        sources = sum((bool(part.bytes), bool(part.text), bool(part.chunks), bool(part.uri)))
        if sources != 1:
            raise MessageFormatError("DocumentPart requires exactly one of Bytes, Text, Chunks, or URI")
        for index, chunk in enumerate(part.chunks or ()):
            if not chunk:
                raise MessageFormatError(f"DocumentPart requires non-empty Chunks[{index}]")
    elif isinstance(part, ToolUsePart):
        if not part.id or not part.name:
            raise MessageFormatError("ToolUsePart requires id and name")
        if not isinstance(part.input, dict):
            raise MessageFormatError("ToolUsePart requires input to be a JSON object")
    elif isinstance(part, ToolResultPart) and not part.tool_use_id:
        raise MessageFormatError("ToolResultPart requires tool_use_id")


def _read_part(value: Any) -> Part:
    if not isinstance(value, dict):
        raise MessageFormatError("decode part object: expected JSON object")
    kind = value.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise MessageFormatError("decode part kind: json: kind must be a string")
    if not kind:
        raise MessageFormatError("message part requires kind")
    part_type = PART_TYPES.get(kind)
    if part_type is None:
        raise MessageFormatError(f'unknown part kind "{kind}"')
    try:
        part: Part = _read_fields(part_type, _PART_FIELDS[part_type], value, "", also=("kind",))
    except MessageFormatError as error:
        raise MessageFormatError(f"decode {part_type.__name__}: {error}") from error
    check_part(part)
    return part


def _write_part(part: Part) -> str:
    fields = _PART_FIELDS.get(type(part))
    if fields is None:
        raise MessageFormatError(f"unknown part type {type(part).__name__}")
    check_part(part)
    return _write_fields(fields, part, "", head=f'"kind":{exactjson.quote(part.kind)}')


def _read_message(value: Any) -> Message:
    """A message from its decoded JSON value (see `exactjson.loads`)."""
    if not isinstance(value, dict):
        raise MessageFormatError("expected JSON object")
    unknown = sorted(key for key in value if key not in ("role", "parts", "meta"))
    if unknown:
        raise MessageFormatError(f'json: unknown field "{unknown[0]}"')
    role = value.get("role")
    if role not in Role.__members__.values():
        raise MessageFormatError(f"message role must be system, user or assistant, got {exactjson.dumps(role)}")
    raw_parts = value.get("parts")
    if raw_parts is not None and not isinstance(raw_parts, list):
        raise _wrong("parts", "an array")
    parts = []
    for index, raw in enumerate(raw_parts or ()):
        try:
            parts.append(_read_part(raw))
        except MessageFormatError as error:
            raise MessageFormatError(f"decode parts[{index}]: {error}") from error
    return Message(role=Role(str(role)), parts=parts, meta=_OBJECT.read(value.get("meta"), "meta"))


def _write_message(message: Message) -> str:
    if not isinstance(message, Message):
        raise MessageFormatError(f"expected a Message, got {type(message).__name__}")
    if message.role not in Role.__members__.values():
        raise MessageFormatError(f"message role must be system, user or assistant, got {message.role!r}")
    encoded = []
    for index, part in enumerate(message.parts):
        try:
            encoded.append(_write_part(part))
        except MessageFormatError as error:
            raise MessageFormatError(f"encode parts[{index}]: {error}") from error
    parts = "[" + ",".join(encoded) + "]" if encoded else "null"
    meta = _OBJECT.write(message.meta, "meta")
    return f'{{"role":{exactjson.quote(message.role)},"parts":{parts},"meta":{meta}}}'


def decode_message(data: str | bytes) -> Message:
    """One message from its JSON text."""
    return _read_message(_load(data))


def encode_message(message: Message) -> bytes:
    return _write_message(message).encode("utf-8")


def decode_messages(payload: str | bytes) -> list[Message]:
    """A transcript delta: the JSON array a `transcript_messages_*` record holds."""
    try:
        values = _load(payload)
        if values is None:
            return []  # Go reads `null` as an empty slice
        if not isinstance(values, list):
            raise MessageFormatError("expected a JSON array of messages")
        messages = []
        for index, value in enumerate(values):
            try:
                messages.append(_read_message(value))
            except MessageFormatError as error:
                raise MessageFormatError(f"message[{index}]: {error}") from error
        return messages
    except MessageFormatError as error:
        raise MessageFormatError(f"transcript: unmarshal runlog delta: {error}") from error


def encode_messages(messages: Iterable[Message]) -> bytes:
    """The payload of a `transcript_messages_*` record."""
    try:
        return ("[" + ",".join(_write_message(message) for message in messages) + "]").encode("utf-8")
    except MessageFormatError as error:
        raise MessageFormatError(f"transcript: marshal runlog delta: {error}") from error


def _load(data: str | bytes) -> Any:
    try:
        return exactjson.loads(data)
    except exactjson.JsonError as error:
        raise MessageFormatError(str(error)) from error
