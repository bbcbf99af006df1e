"""A feed cursor kept in an owner-only file, so a later process resumes after it."""

from __future__ import annotations

import reprlib
from pathlib import Path

from cairn.client.errors import UnexpectedAnswer
from cairn.client.private import UnsafeFile, locked, read_private
from cairn.decimal_text import MAX_DIGITS, parse_decimal
from cairn.disk import write_durably


def feed_position(value: object) -> int:
    """An event's `sequence` as a cursor keeps it; `UnexpectedAnswer` for what no Cairn server sends.

    Saved unchecked, a sequence past what the file reads back (`10**19`, `1e+30`, `5.5`) left a cursor
    file every later run refused, and a string one failed with a `TypeError`.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**MAX_DIGITS:
        return value
    raise UnexpectedAnswer(f"The server answered {reprlib.repr(value)} as an event's sequence.")


class CursorFile:
    """The last handled sequence of one feed.

    It only moves forward: advancing to an older sequence keeps the newer
    one, as when events are acknowledged out of order.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> int:
        """The saved sequence; 0 (the start of the feed) when nothing is saved yet."""
        try:
            saved = read_private(self.path)
        except FileNotFoundError:
            return 0
        sequence = parse_decimal(saved.decode("ascii", errors="replace").strip())
        if sequence is None:
            raise UnsafeFile(f"{self.path} does not hold a cursor.")
        return sequence

    def advance(self, sequence: int) -> int:
        """Save `sequence` if it is past the saved one; the cursor after the call.

        Read and written under a lock, so processes advancing one cursor at
        once (`events ack` beside `events follow`) never put it back.
        """
        sequence = feed_position(sequence)
        with locked(self.path):
            current = self.read()
            if sequence <= current:
                return current
            write_durably(self.path, f"{sequence}\n".encode())
        return sequence
