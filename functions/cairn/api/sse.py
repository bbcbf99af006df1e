"""The feed as server-sent events: `GET {events_url}` with `Accept: text/event-stream`.

Each event is one frame: `id:` its sequence (so a browser's `EventSource`
sends it back as `Last-Event-ID` when it reconnects, and it is the feed
cursor), `event:` its type, `data:` the event JSON exactly as a poll page
holds it. An idle stream sends a comment every `stream_heartbeat_seconds` and
the stream ends after `max_stream_seconds`; the client reconnects with
`Last-Event-ID` and loses nothing.

The answer's body is an iterator of byte chunks. Only the edges that can send
a body piece by piece take it: the streaming Lambda loop
(`cairn.entrypoints.streaming`) and `cairn serve` (`cairn.local.asgi`). Their
Lambda contexts say so with `streams_responses`; a buffered edge answers 406.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from cairn.addresses.feed import Feed
from cairn.addresses.models import Event
from cairn.api import presenters
from cairn.api.requests import bearer_token, client_network
from cairn.decimal_text import is_decimal
from cairn.errors import CairnError, InvalidRequest, StreamUnavailable

logger = Logger(service="cairn")

EVENT_STREAM = "text/event-stream"
HEARTBEAT = b": heartbeat\n\n"
# How long a browser's EventSource waits before it reconnects after a stream ends.
RECONNECT_MILLISECONDS = 1_000
# The `event:` name of a type that cannot stand on one line; `data` still carries the type.
DEFAULT_EVENT_NAME = "message"

Middleware = Callable[[Any, NextMiddleware], Response[Any]]


def wants_event_stream(accept: str) -> bool:
    """Whether an `Accept` header names `text/event-stream` (with a non-zero quality)."""
    for media_range in accept.split(","):
        media, *parameters = (part.strip().lower() for part in media_range.split(";"))
        if media != EVENT_STREAM:
            continue
        qualities = [value for name, _, value in (p.partition("=") for p in parameters) if name.strip() == "q"]
        return not qualities or qualities[0].strip() not in ("0", "0.0", "0.00", "0.000")
    return False


# What some line readers end a line at besides CR and LF (Python's `str.splitlines`, which httpx's
# `iter_lines` uses). Raw in a frame, they split it there: an inbox post's type could forge a frame of
# its own for such a reader, and its data make the rest unreadable.
_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# JSON escapes the others already (control characters below U+0020).
_ESCAPE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def event_frame(item: Event) -> bytes:
    """One event as an SSE frame: one line per field however its reader splits lines, so one `data:`
    field carries its JSON; a type that would break a line is sent as `message` (it is in the data)."""
    fits = item.type and not any(mark in item.type for mark in _LINE_BREAKS)
    name = item.type if fits else DEFAULT_EVENT_NAME
    data = presenters.event(item).model_dump_json().translate(_ESCAPE_BREAKS)
    return f"id: {item.sequence}\nevent: {name}\ndata: {data}\n\n".encode()


class Frames(Iterator[bytes]):
    """The body of a stream: the reconnect delay, then a chunk per batch of events or heartbeat.

    A stream that cannot go on (the address was deleted, storage failed)
    ends; the client resumes from its last id on the next connection.
    Closing the body closes the batches (giving their stream slot back), also
    before the first chunk is drawn, which closing a generator would not do.
    """

    def __init__(self, batches: Iterator[list[Event]]) -> None:
        self._batches = batches
        self._chunks = self._made()

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        try:
            self._chunks.close()
        finally:
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()

    def _made(self) -> Generator[bytes, None, None]:
        yield f"retry: {RECONNECT_MILLISECONDS}\n\n".encode()
        try:
            for batch in self._batches:
                yield b"".join(event_frame(item) for item in batch) if batch else HEARTBEAT
        except CairnError as error:
            logger.info("event stream ended early", extra={"error_code": error.code})
        except Exception:  # noqa: BLE001 - the answer has started; ending the stream is all that is left
            logger.exception("event stream failed")


def last_event_id(headers: dict[str, str], maximum: int) -> int | None:
    """The `Last-Event-ID` a reconnecting client sends: the sequence it saw last."""
    value = headers.get("last-event-id")
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not is_decimal(text) or len(text) > len(str(maximum)) or int(text) > maximum:
        raise InvalidRequest(f"Last-Event-ID must be an event sequence from 0 to {maximum}.", field="Last-Event-ID")
    return int(text)


def event_stream(feed: Feed, *, max_cursor: int) -> Middleware:
    """A middleware for the feed route: answer `Accept: text/event-stream` with a stream.

    It runs after the route's query is validated (`after`, `limit`) and before
    the route's own JSON answer, which it leaves to requests for JSON.
    """

    def middleware(app: Any, next_middleware: NextMiddleware) -> Response[Any]:
        request = app.current_event
        if not wants_event_stream(request.headers.get("accept", "")):
            return next_middleware(app)
        if not getattr(app.lambda_context, "streams_responses", False):
            raise StreamUnavailable("This server answers buffered only; poll the feed with `wait` instead.")
        arguments = app.context["_route_args"]
        resume = last_event_id(request.headers, max_cursor)
        batches = feed.watch(
            arguments["address_id"],
            bearer_token(request),
            after=arguments["after"] if resume is None else resume,
            limit=arguments["limit"],
            client=client_network(request),
        )
        return Response(
            status_code=200,
            content_type=EVENT_STREAM,
            # Proxies must neither cache nor hold back the stream.
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            body=Frames(batches),
        )

    return middleware
