"""Parsing client JSON safely and writing it canonically.

Canonical text (sorted keys, no spaces) makes "the same body" mean the same
content, whatever whitespace or key order a retry used.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

from cairn.errors import InvalidJson

# How deeply a JSON body may nest arrays and objects (`[[1]]` nests 2 levels), so that every value
# Cairn accepts leaves through every surface: pydantic serializes at most 255 levels (answers, event
# stream frames) and parses at most 200 (the MCP SDK reads messages with it); an MCP answer wraps a
# value in 5 more (JSON-RPC message, result, structuredContent, page, event); Python's recursion
# limit of 1,000 frames is shared by the stdlib's JSON and the recursive encoders on the way (SDK,
# Powertools, exact JSON). 128 leaves each of them room, is serde_json's default too, and is far
# beyond what a document an agent writes needs. A constant, not a setting: a higher one breaks reads.
MAX_DEPTH = 128
# Bytes that open or close nothing (deleted), and each bracket's step in depth as a signed byte.
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_NESTING_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
# A `\\uD800`-`\\uDFFF` escape: only text holding one can decode to an unpaired surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every unpaired surrogate replaced by U+FFFD: what no answer or stored text can carry."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def parse(raw: bytes | str) -> Any:
    """Decode a request body, turning every malformation into `invalid_json`.

    An escaped UTF-16 surrogate without its pair is a malformation too: it
    decodes to no character, so no answer or stored text could carry it. So
    is nesting deeper than `MAX_DEPTH`, refused before any decoding.
    """
    text = _text(raw)
    _require_shallow(text)
    value = _loads(text)
    if _SURROGATE_ESCAPE.search(text):
        _require_whole_characters(value)
    return value


def require_parseable(raw: bytes | str) -> None:
    """The nesting and surrogate rules of `parse`, for a body another reader decodes (exact numbers, say).

    Costs a count of brackets (a scan only when there are many), and a
    decoding only when the text holds a surrogate escape.
    """
    text = _text(raw)
    _require_shallow(text)
    if _SURROGATE_ESCAPE.search(text):
        _require_whole_characters(_loads(text))


def depth(text: str) -> int:
    """How deeply JSON text nests arrays and objects: 0 for a scalar, 1 for `[]` or `{"a": 1}`.

    Counts the brackets outside string literals without decoding, so it also
    measures text too deep for a recursive decoder; every step runs in C, in
    about the time decoding takes. Exact for JSON; for other text, a figure
    that the decoder's refusal makes moot.
    """
    outside = _outside_strings(text).encode("utf-8", "ignore")
    return max(accumulate(array("b", outside.translate(_NESTING_STEPS, _NOT_BRACKETS))), default=0)


def _outside_strings(text: str) -> str:
    """JSON text without its string literals, found without decoding."""
    # Escaped backslashes, then escaped quotes, go first: every quote left opens or closes a string,
    # so the even pieces between quotes are what lies outside strings.
    return "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])


# The most JSON values (about: commas and opening brackets) a body that is validated may hold: validation
# names each problem it finds, about 1.5 KB of memory apiece, and 6 MB can hold 700,000 unknown fields.
MAX_VALIDATED_VALUES = 250_000


def holds_more_values(text: str, limit: int) -> bool:
    """Whether JSON text holds more than about `limit` values: commas and opening brackets outside strings.

    A count in C; text with fewer commas and brackets than `limit` in all is not scanned for strings.
    """
    if text.count(",") + text.count("[") + text.count("{") <= limit:
        return False
    outside = _outside_strings(text)
    return outside.count(",") + outside.count("[") + outside.count("{") > limit


def nests_too_deeply(text: str) -> bool:
    """Whether JSON text nests deeper than `MAX_DEPTH`; text with fewer brackets than that is not scanned."""
    return text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH


def stored(text: str) -> tuple[Any, bool]:
    """A stored value (canonical JSON text) for an answer: `(value, False)`, or `(text, True)` when too deep.

    Values nested deeper than `MAX_DEPTH` were accepted before the limit; no
    answer can carry them as JSON, so they leave as their text, which a
    reader allowing the depth decodes to the value as it was stored.
    """
    return (text, True) if nests_too_deeply(text) else (json.loads(text), False)


def _text(raw: bytes | str) -> str:
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise InvalidJson("The body is not valid UTF-8.") from error


def _require_shallow(text: str) -> None:
    if nests_too_deeply(text):
        raise InvalidJson(f"The body nests deeper than {MAX_DEPTH} levels.", max_depth=MAX_DEPTH)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError as error:
        raise InvalidJson("The body nests too deeply.") from error
    except ValueError as error:
        raise InvalidJson(f"The body is not valid JSON: {error}.") from error


def _require_whole_characters(value: Any) -> None:
    """Raise `invalid_json` naming the first string (as a JSON path) that holds a lone surrogate."""
    pending: list[tuple[str, Any]] = [("$", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                raise InvalidJson(f"The string at {path} holds an unpaired UTF-16 surrogate escape.", path=path)
        elif isinstance(item, list):
            pending.extend((f"{path}[{index}]", element) for index, element in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            for key, element in reversed(list(item.items())):
                if _LONE_SURROGATE.search(key):
                    raise InvalidJson(
                        f"A key of the object at {path} holds an unpaired UTF-16 surrogate escape.", path=path
                    )
                pending.append((f"{path}.{_printable(key)}", element))


def _printable(key: str) -> str:
    return json.dumps(key) if not key.isidentifier() else key


def sent_size(text: str) -> int:
    """At most the bytes JSON text takes once answered through Lambda.

    Powertools writes answers ASCII-escaped (`é` becomes `\\u00e9`, six
    bytes for two in UTF-8) and Lambda's proxy envelope holds the whole body
    as one JSON string, escaping every quote and backslash again. Exact for
    text in the Basic Multilingual Plane, a few bytes over for emoji.
    """
    if text.isascii():  # the common case, without writing the text out again
        return len(text) + text.count('"') + text.count("\\")
    escaped = len(json.dumps(text)) - 2  # the body's form, quotes and backslashes escaped once
    unicode_escapes = escaped - len(text) - text.count('"') - text.count("\\")  # 5 extra bytes per \\uXXXX
    return escaped + -(-unicode_escapes // 5)  # the envelope doubles each escape's backslash


def value_sent_size(value: Any) -> int:
    """What a parsed value takes in an answer: its canonical text, escaped as Lambda carries it
    (measuring the raw text would miss that a control character grows sevenfold there)."""
    return sent_size(canonical(value))


def canonical(value: Any) -> str:
    """Compact, key-sorted JSON text of a parsed value."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError as error:
        raise InvalidJson("The body nests too deeply.") from error
    except ValueError as error:
        raise InvalidJson(f"The body holds a value JSON cannot represent: {error}.") from error
