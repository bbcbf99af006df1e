"""JSON text as goa-ai's Go codec reads and writes it.

Transcripts written by Go must replay byte for byte, so decoding keeps every
number exact (integers as `int`, anything else as a `Number` that remembers
its literal) and encoding writes what Go's `encoding/json` writes: compact
text, `<`, `>`, `&`, U+2028 and U+2029 escaped, unpaired surrogates as
U+FFFD, floats in Go's notation. Object keys keep their order unless asked
to sort them, as Go does for maps.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NoReturn

from cairn.jsontext import valid_text


class JsonError(ValueError):
    """Text that is not exactly one JSON value, or a value JSON cannot hold."""


class Number(Decimal):
    """A JSON number `int` cannot keep as written: equal to its exact decimal
    value, and encoded back exactly as it was read (`1e3` stays `1e3`)."""

    __slots__ = ("literal",)
    literal: str

    def __new__(cls, literal: str) -> Number:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number

    def __repr__(self) -> str:
        return f"Number({self.literal!r})"

    # Immutable, and Decimal's own copies would forget the literal.
    def __copy__(self) -> Number:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Number:
        return self


_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})
# Python keeps an escaped lone surrogate (`\ud800`) as is; Go reads and writes U+FFFD.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _integer(literal: str) -> int | Number:
    # `-0` is an integer literal that `int` would write back as `0`.
    return Number(literal) if literal == "-0" else int(literal)


def _reject_constant(name: str) -> NoReturn:
    raise JsonError(f"invalid character: {name} is not JSON")


_DECODER = json.JSONDecoder(parse_float=Number, parse_int=_integer, parse_constant=_reject_constant)


def loads(text: str | bytes) -> Any:
    """Exactly one JSON value, numbers exact, unpaired surrogates as U+FFFD."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise JsonError("invalid UTF-8") from error
    try:
        value = _DECODER.decode(text)
    except RecursionError as error:
        raise JsonError("JSON nests too deeply") from error
    except ValueError as error:
        raise JsonError(f"invalid JSON: {error}") from error
    except ArithmeticError as error:  # decimal.InvalidOperation: an exponent past what a Decimal holds
        raise JsonError("invalid JSON: a number's exponent is out of range") from error
    return _valid_strings(value) if _SURROGATE_ESCAPE.search(text) else value


def _valid_strings(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_valid_strings(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): _valid_strings(item) for key, item in value.items()}
    return value


def quote(text: str) -> str:
    """A JSON string literal, escaped as Go escapes it."""
    return json.dumps(valid_text(text), ensure_ascii=False).translate(_GO_ESCAPES)


def dumps(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON text of a value, byte for byte what Go would write.

    `sort_keys` is Go's map order; pass False for raw JSON kept as written.
    """
    out: list[str] = []
    _write(value, sort_keys, out.append)
    return "".join(out)


def _write(value: Any, sort_keys: bool, emit: Callable[[str], object]) -> None:
    if isinstance(value, dict):
        emit("{")
        items = sorted(value.items()) if sort_keys else value.items()
        for index, (key, item) in enumerate(items):
            if not isinstance(key, str):
                raise JsonError(f"json: object keys must be strings, not {type(key).__name__}")
            emit(("," if index else "") + quote(key) + ":")
            _write(item, sort_keys, emit)
        emit("}")
    elif isinstance(value, list | tuple):
        emit("[")
        for index, item in enumerate(value):
            if index:
                emit(",")
            _write(item, sort_keys, emit)
        emit("]")
    else:
        emit(_scalar(value))


def _scalar(value: Any) -> str:
    # Booleans before integers (`True` is an `int`), exact numbers before other decimals.
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Number):
        return value.literal
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise JsonError(f"json: unsupported value: {value}")
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    raise JsonError(f"json: unsupported type: {type(value).__name__}")


def go_float(value: float) -> str:
    """A float as Go writes a float64: positional between 1e-6 and 1e21, else `1e-7` style."""
    if not math.isfinite(value):
        raise JsonError(f"json: unsupported value: {value}")
    magnitude = abs(value)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        return format(Decimal(repr(value)).normalize(), "f")
    # Python's shortest form matches Go's `e` format except Go drops a
    # negative exponent's leading zero (`1e-07` becomes `1e-7`).
    return re.sub(r"e-0(\d)$", r"e-\1", repr(value))


def b64encode(data: bytes) -> str:
    """Bytes as Go's encoding/json writes `[]byte`: standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as error:  # binascii.Error, or text that is not ASCII
        raise JsonError("illegal base64 data") from error
