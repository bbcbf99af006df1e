"""Read server-sent events: the frames `GET {events_url}` answers with `Accept: text/event-stream`.

Parsed as the HTML standard's `EventSource` parses them: `field: value`
lines, a blank line ends a message, a line starting with `:` is a comment
(the server's heartbeat). Fields this SDK does not use (`retry:`) are read
and dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# The HTML standard ends a stream's lines at CRLF, LF or CR, and nowhere else (not at U+2028 and the
# other breaks `str.splitlines` knows, where a sender's text could otherwise split a frame).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Message:
    """One dispatched event: `id` (the feed sequence as text), `event` (its name), `data`."""

    id: str | None
    event: str
    data: str


@dataclass(frozen=True)
class Comment:
    """A `:` line; Cairn sends `: heartbeat` while a stream is idle."""

    text: str


def lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of a stream's text as it arrives in chunks, without their breaks (CRLF, LF or CR)."""
    line: list[str] = []  # the pieces of the line not yet ended
    after_cr = False  # the last chunk ended with CR, whose LF may open the next one
    for chunk in chunks:
        if not chunk:
            continue
        if after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]
        after_cr = chunk.endswith("\r")
        start = 0
        for found in _LINE_BREAK.finditer(chunk):
            line.append(chunk[start : found.start()])
            yield "".join(line)
            line, start = [], found.end()
        line.append(chunk[start:])
    if any(line):
        yield "".join(line)


def parse(lines: Iterable[str]) -> Iterator[Message | Comment]:
    """The messages and comments of a stream, given its lines without their line breaks."""
    event_id: str | None = None
    name = ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield Message(event_id, name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            yield Comment(line[1:].strip())
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            # Like EventSource, the last id stays in force until another replaces it.
            event_id = value
