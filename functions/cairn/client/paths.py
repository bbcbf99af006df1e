"""One value as one segment of a request's URL path."""

from __future__ import annotations

from urllib.parse import quote

from cairn.errors import InvalidRequest

# What an HTTP client resolves away before sending: `{address}/state/..` would be the address itself.
_NO_SEGMENT = frozenset({"", ".", ".."})


def segment(value: str, name: str) -> str:
    """`value` percent-encoded as one path segment; `InvalidRequest` (nothing sent) for one no path can carry."""
    if value in _NO_SEGMENT:
        raise InvalidRequest(f"A {name} of {value!r} cannot be named in a URL path.", field=name)
    return quote(value, safe="")
