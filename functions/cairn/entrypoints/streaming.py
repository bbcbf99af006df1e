"""Answer API Gateway through Lambda response streaming, with the same resolver as the API function.

Lambda's managed Python runtime only returns buffered answers, capped at 6 MB:
a base64 body of about 4.4 MB. Attachments go up to 10 MB, so the function
behind the download route runs this loop instead of Lambda's own
(`stream_bootstrap`, its AWS_LAMBDA_EXEC_WRAPPER, starts it). The loop takes
each invocation from the Lambda Runtime API, resolves it with the same handler
the API function runs, and posts the answer in the format API Gateway's STREAM
transfer mode reads: a JSON prelude with the status and headers, eight NUL
bytes, then the raw body, chunked.

The feed's function runs the same loop: there an answer's body may also be an
iterator of chunks (a stream of server-sent events, `cairn.api.sse`), each
sent to the Runtime API as soon as the iterator yields it. It also answers
`POST /mcp`, whose `poll_events` may wait: one JSON body (or none, for a
notification) like any other answer.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cairn.api.held_body import CHUNK_BYTES

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

API_VERSION = "2018-06-01"
STREAMING_CONTENT_TYPE = "application/vnd.awslambda.http-integration-response"
# API Gateway reads the prelude up to these eight bytes; the body follows as is.
PRELUDE_DELIMITER = b"\x00" * 8


@dataclass(frozen=True)
class Invocation:
    """One event from `/runtime/invocation/next` and what its headers say about it."""

    request_id: str
    event: dict[str, Any]
    deadline_ms: int
    invoked_function_arn: str
    trace_id: str | None


class InvocationContext:
    """The Lambda context attributes Powertools and the routes read."""

    # Answers whose body is an iterator of chunks go out as they are made (see `streamed_chunks`).
    streams_responses = True

    def __init__(self, invocation: Invocation, environ: dict[str, str]) -> None:
        self.aws_request_id = invocation.request_id
        self.invoked_function_arn = invocation.invoked_function_arn
        self.function_name = environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0"))
        self.log_group_name = environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline_ms = invocation.deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


class RuntimeApi:
    """The Lambda Runtime API at `host:port`, over one kept-alive HTTP/1.1 connection."""

    def __init__(self, address: str) -> None:
        self._connection = http.client.HTTPConnection(address)

    def next_invocation(self) -> Invocation:
        """Block until Lambda hands over the next event."""
        status, headers, body = self._call("GET", f"/{API_VERSION}/runtime/invocation/next")
        if status != 200:
            raise RuntimeError(f"The Runtime API answered {status} for the next invocation.")
        return Invocation(
            request_id=headers["Lambda-Runtime-Aws-Request-Id"],
            event=json.loads(body),
            deadline_ms=int(headers.get("Lambda-Runtime-Deadline-Ms", "0")),
            invoked_function_arn=headers.get("Lambda-Runtime-Invoked-Function-Arn", ""),
            trace_id=headers.get("Lambda-Runtime-Trace-Id"),
        )

    def stream_response(self, request_id: str, chunks: Iterator[bytes]) -> None:
        headers = {
            "Lambda-Runtime-Function-Response-Mode": "streaming",
            "Transfer-Encoding": "chunked",
            "Content-Type": STREAMING_CONTENT_TYPE,
        }
        self._call("POST", f"/{API_VERSION}/runtime/invocation/{request_id}/response", chunks, headers)

    def report_error(self, request_id: str, error: BaseException) -> None:
        self._report(f"/{API_VERSION}/runtime/invocation/{request_id}/error", error)

    def report_init_error(self, error: BaseException) -> None:
        self._report(f"/{API_VERSION}/runtime/init/error", error)

    def _report(self, path: str, error: BaseException) -> None:
        body = json.dumps(
            {
                "errorMessage": str(error),
                "errorType": type(error).__name__,
                "stackTrace": traceback.format_exception(error),
            }
        ).encode()
        headers = {"Content-Type": "application/json", "Lambda-Runtime-Function-Error-Type": type(error).__name__}
        self._call("POST", path, body, headers)

    def _call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        chunked = (headers or {}).get("Transfer-Encoding") == "chunked"
        self._connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        response = self._connection.getresponse()
        return response.status, response.headers, response.read()


def streamed_chunks(response: dict[str, Any]) -> Iterator[bytes]:
    """A proxy answer (`statusCode`, headers, body) in the streaming format, as chunks.

    The body is text, base64 text, or an iterator of byte chunks, passed on one by one.
    """
    prelude = {
        "statusCode": response.get("statusCode", 200),
        "headers": response.get("headers") or {},
        "multiValueHeaders": response.get("multiValueHeaders") or {},
    }
    yield json.dumps(prelude).encode() + PRELUDE_DELIMITER
    body = response.get("body") or ""
    if not isinstance(body, str):
        yield from body
        return
    payload = memoryview(base64.b64decode(body) if response.get("isBase64Encoded") else body.encode())
    for start in range(0, len(payload), CHUNK_BYTES):
        yield bytes(payload[start : start + CHUNK_BYTES])


def handle_next(runtime: RuntimeApi, handler: Handler, environ: dict[str, str]) -> None:
    """Serve one invocation: resolve it, then stream the answer or report the failure."""
    invocation = runtime.next_invocation()
    if invocation.trace_id is not None:
        # X-Ray's SDK and Powertools read the segment from here, as under Lambda's own loop.
        os.environ["_X_AMZN_TRACE_ID"] = invocation.trace_id
    try:
        response = handler(invocation.event, InvocationContext(invocation, environ))
    except Exception as error:  # noqa: BLE001 - every failure is Lambda's to record, then the loop goes on
        runtime.report_error(invocation.request_id, error)
        return
    try:
        runtime.stream_response(invocation.request_id, streamed_chunks(response))
    finally:
        # A body that holds something (an event stream's slot) gives it back, also when sending failed
        # before the body was drawn at all.
        close = getattr(response.get("body"), "close", None)
        if close is not None:
            close()


def main() -> None:
    runtime = RuntimeApi(os.environ["AWS_LAMBDA_RUNTIME_API"])
    try:
        # Imported here so that a broken cold start is reported to Lambda, not lost.
        from cairn.entrypoints.api_handler import streaming_handler
    except Exception as error:  # noqa: BLE001 - Lambda records why the cold start failed
        runtime.report_init_error(error)
        sys.exit(1)
    environ = dict(os.environ)
    while True:
        handle_next(runtime, streaming_handler, environ)


if __name__ == "__main__":
    main()
