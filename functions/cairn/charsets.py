"""The codec that reads text in a charset a stranger declared (a mail part, an inbox post)."""

from __future__ import annotations

import codecs

# Codecs whose decoders take time quadratic in a stranger's bytes (punycode) or refuse to replace what they
# cannot read (idna, undefined): no stranger's text is decoded with them.
UNREAD_CODECS = frozenset({"punycode", "idna", "undefined"})


def declared_codec(declared: str) -> str | None:
    """Python's name for the `declared` charset, UTF-8 when Python knows none by that name; None for one of
    `UNREAD_CODECS`, which the caller reads its own way (mail as UTF-8, an inbox post as bytes)."""
    try:
        name = codecs.lookup(declared).name
    except (LookupError, ValueError):  # ValueError: a name holding NUL
        return "utf-8"
    return None if name in UNREAD_CODECS else name
