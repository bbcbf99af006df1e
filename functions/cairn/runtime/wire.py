"""JSON form of the runtime store's commands and results, both directions.

Field names are the dataclass names; bytes travel as base64, times as
RFC 3339 in UTC with milliseconds, enums as their string values. Decoding
is strict: unknown fields and missing required fields are refused.
"""

from __future__ import annotations

import base64
import dataclasses
import reprlib
import types
import typing
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Any


class WireError(ValueError):
    """A JSON document that does not describe the expected command."""


# An error names what it refuses in at most about this many characters: a stranger's value (or map key)
# echoed whole could make the error larger than the request, and than an answer may be.
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 60
_MAX_KEY_SHOWN = 60


def _shown(value: Any) -> str:
    return _SHOWN.repr(value)


def encode(value: Any) -> Any:
    """The JSON form of a command or result (or any part of one)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: encode(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    return value


# What `format_time` writes: UTC with milliseconds, or microseconds for a session time that was sent with them.
TIME_IN_ANSWER_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}(?:[0-9]{3})?Z$"


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC; sub-millisecond digits are kept so the store can refuse them."""
    moment = moment.astimezone(UTC)
    digits = f"{moment.microsecond:06d}"
    fraction = digits[:3] if digits.endswith("000") else digits
    # isoformat, unlike strftime's %Y, pads years before 1000 to the four digits RFC 3339 requires.
    return moment.replace(tzinfo=None, microsecond=0).isoformat() + "." + fraction + "Z"


def decode(kind: Any, value: Any, where: str = "body") -> Any:
    """The `kind` that the JSON `value` describes; `where` names the value in a `WireError`."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        return None if value is None else decode(options[0], value, where)
    if value is None:
        if kind is datetime:
            return None  # Go's zero time: the store reports which time is required
        raise WireError(f"{where} is required")
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _decode_dataclass(kind, value, where)
    if origin is list:
        (item_kind,) = typing.get_args(kind)
        _expect(value, list, where)
        return [decode(item_kind, item, f"{where}[{index}]") for index, item in enumerate(value)]
    if origin is dict:
        _expect(value, dict, where)
        return {
            str(k): decode(typing.get_args(kind)[1], v, f"{where}.{str(k)[:_MAX_KEY_SHOWN]}") for k, v in value.items()
        }
    return _decode_scalar(kind, value, where)


def _decode_scalar(kind: Any, value: Any, where: str) -> Any:
    """Bytes, a time, an enum member, a string, an integer or a boolean."""
    if kind is bytes:
        _expect(value, str, where)
        try:
            return base64.b64decode(value, validate=True)
        except ValueError as error:  # binascii.Error, or text that is not ASCII
            raise WireError(f"{where} is not base64") from error
    if kind is datetime:
        _expect(value, str, where)
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as error:
            raise WireError(f"{where} is not an RFC 3339 time") from error
        if moment.tzinfo is None:
            raise WireError(f"{where} needs a time zone")
        try:
            return moment.astimezone(UTC)
        except OverflowError as error:  # an offset that moves the time out of years 1 to 9999
            raise WireError(f"{where} is out of range") from error
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError as error:
            raise WireError(f"{where} has an unknown value {_shown(value)}") from error
    if kind in (str, int, bool):
        _expect(value, kind, where)
        if kind is int and isinstance(value, bool):
            raise WireError(f"{where} must be an integer")
        return value
    raise WireError(f"{where} has an unsupported type")


def _decode_dataclass(kind: type, value: Any, where: str) -> Any:
    _expect(value, dict, where)
    hints = _hints(kind)
    unknown = set(value) - set(hints)
    if unknown:
        raise WireError(f"{where} has unknown field {_shown(sorted(unknown)[0])}")
    arguments = {}
    for field in dataclasses.fields(kind):
        if field.name in value:
            arguments[field.name] = decode(hints[field.name], value[field.name], f"{where}.{field.name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise WireError(f"{where}.{field.name} is required")
    return kind(**arguments)


@cache
def _hints(kind: type) -> dict[str, Any]:
    """The type of each field (class-level declarations a base may carry are not fields)."""
    hints = typing.get_type_hints(kind)
    return {field.name: hints[field.name] for field in dataclasses.fields(kind)}


def _expect(value: Any, kind: type, where: str) -> None:
    if not isinstance(value, kind):
        raise WireError(f"{where} must be {'an object' if kind is dict else kind.__name__}")
