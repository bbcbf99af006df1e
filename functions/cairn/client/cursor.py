"""A feed cursor kept in an owner-only file, so a later process resumes after it."""

from __future__ import annotations

from pathlib import Path

from cairn.client.private import UnsafeFile, read_private, write_private
from cairn.decimal_text import parse_decimal


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
            text = read_private(self.path).decode().strip()
        except FileNotFoundError:
            return 0
        sequence = parse_decimal(text)
        if sequence is None:
            raise UnsafeFile(f"{self.path} does not hold a cursor.")
        return sequence

    def advance(self, sequence: int) -> int:
        """Save `sequence` if it is past the saved one; the cursor after the call."""
        current = self.read()
        if sequence <= current:
            return current
        write_private(self.path, f"{sequence}\n".encode())
        return sequence
