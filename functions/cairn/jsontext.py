"""Parsing client JSON safely and writing it canonically.

Canonical text (sorted keys, no spaces) makes "the same body" mean the same
content, whatever whitespace or key order a retry used.
"""

from __future__ import annotations

import json
from typing import Any

from cairn.errors import InvalidJson


def parse(raw: bytes | str) -> Any:
    """Decode a request body, turning every malformation into `invalid_json`."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text)
    except UnicodeDecodeError as error:
        raise InvalidJson("The body is not valid UTF-8.") from error
    except RecursionError as error:
        raise InvalidJson("The body nests too deeply.") from error
    except ValueError as error:
        raise InvalidJson(f"The body is not valid JSON: {error}.") from error


def canonical(value: Any) -> str:
    """Compact, key-sorted JSON text of a parsed value."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError as error:
        raise InvalidJson("The body nests too deeply.") from error
    except ValueError as error:
        raise InvalidJson(f"The body holds a value JSON cannot represent: {error}.") from error
