"""Parsing client JSON safely and writing it canonically.

Canonical text (sorted keys, no spaces) makes "the same body" mean the same
content, whatever whitespace or key order a retry used.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cairn.errors import InvalidJson

# A `\\uD800`-`\\uDFFF` escape: only text holding one can decode to an unpaired surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse(raw: bytes | str) -> Any:
    """Decode a request body, turning every malformation into `invalid_json`.

    An escaped UTF-16 surrogate without its pair is a malformation too: it
    decodes to no character, so no answer or stored text could carry it.
    """
    text = _text(raw)
    value = _loads(text)
    if _SURROGATE_ESCAPE.search(text):
        _require_whole_characters(value)
    return value


def require_whole_characters(raw: bytes | str) -> None:
    """The surrogate rule of `parse`, for a body another reader decodes (exact numbers, say).

    Costs a search of the text, and a second decoding only when it holds a surrogate escape.
    """
    text = _text(raw)
    if _SURROGATE_ESCAPE.search(text):
        _require_whole_characters(_loads(text))


def _text(raw: bytes | str) -> str:
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise InvalidJson("The body is not valid UTF-8.") from error


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


def canonical(value: Any) -> str:
    """Compact, key-sorted JSON text of a parsed value."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError as error:
        raise InvalidJson("The body nests too deeply.") from error
    except ValueError as error:
        raise InvalidJson(f"The body holds a value JSON cannot represent: {error}.") from error
