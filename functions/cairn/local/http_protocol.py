"""uvicorn's httptools protocol with Cairn's JSON errors and a bound on a request's head.

httptools (llhttp, in C) parses a request in a fraction of the time h11 (pure
Python) takes, but as uvicorn uses it:
- whatever it cannot parse (a NUL or other control character in a header
  value, a malformed header name, a bare CR or LF) is answered with a
  plain-text 400 of uvicorn's own, where a client of Cairn reads every
  refusal as `{"error": {"code": ..., "message": ...}}`;
- a request's line and headers may grow without limit (httptools gathers a
  header value in memory however long it runs), where h11 stops at 16 KiB.

This protocol answers the first with the code `bad_request` and refuses a
head past `MAX_HEAD_BYTES` with 431 `request_head_too_large`, both as JSON,
closing the connection after either: after a framing error nothing later on
it can be trusted.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cairn.local.asgi import error_body

# A request line and headers larger than this are refused before more of them is read. API Gateway's
# own bound is 10 KiB; this one leaves room for what a browser sends to localhost (every local app's cookies).
MAX_HEAD_BYTES = 64 * 1024


MALFORMED_REQUEST = error_body("bad_request", "The request is not valid HTTP/1.1, so it was not read.").encode()
HEAD_TOO_LARGE = error_body(
    "request_head_too_large", f"The request line and headers exceed {MAX_HEAD_BYTES} bytes, so they were not read."
).encode()


class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's `HttpToolsProtocol` (pass the class as `uvicorn.Config(http=...)`), refusing as Cairn does."""

    # Bytes of the current request's head fed to the parser so far, and whether its body is being read.
    _head_bytes = 0
    _reading_body = False

    def data_received(self, data: bytes) -> None:
        # The head is fed at most `MAX_HEAD_BYTES` at a time, so the parser never holds more of it than that
        # (and never more than twice that when one chunk also carries the head of a pipelined request).
        while data and not self._reading_body:
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:
                self._answer_and_close(b"431 Request Header Fields Too Large", HEAD_TOO_LARGE)
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return
        if data:
            super().data_received(data)

    def on_headers_complete(self) -> None:
        self._reading_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._reading_body, self._head_bytes = False, 0
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        # `msg` is uvicorn's generic text, which uvicorn has logged; the answer carries Cairn's own.
        self._answer_and_close(b"400 Bad Request", MALFORMED_REQUEST)

    def _answer_and_close(self, status: bytes, body: bytes) -> None:
        head = [b"HTTP/1.1 " + status + b"\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
