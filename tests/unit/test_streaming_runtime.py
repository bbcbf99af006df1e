"""The response-streaming loop against a Runtime API endpoint speaking Lambda's protocol."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator

import pytest

from cairn.entrypoints.streaming import CHUNK_BYTES, STREAMING_CONTENT_TYPE, RuntimeApi, handle_next
from tests.support.runtime_api import FakeRuntimeApi

EVENT = {"httpMethod": "GET", "path": "/api/v1/addresses/a/events/e/attachments/att_1"}


@pytest.fixture
def runtime_api() -> Iterator[FakeRuntimeApi]:
    with FakeRuntimeApi() as api:
        yield api


def binary_answer(payload: bytes, status: int = 200) -> dict:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/zip", "Content-Disposition": 'attachment; filename="a.zip"'},
        "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
        "body": base64.b64encode(payload).decode(),
        "isBase64Encoded": True,
    }


def test_a_binary_answer_streams_as_prelude_delimiter_and_raw_bytes(runtime_api: FakeRuntimeApi):
    payload = os.urandom(3 * CHUNK_BYTES + 17)
    request_id = runtime_api.invoke(EVENT)
    handle_next(RuntimeApi(runtime_api.address), lambda event, context: binary_answer(payload), {})
    posted = runtime_api.next_post()
    assert posted.path == f"/2018-06-01/runtime/invocation/{request_id}/response"
    assert posted.headers["Lambda-Runtime-Function-Response-Mode"] == "streaming"
    assert posted.headers["Transfer-Encoding"] == "chunked"
    assert posted.headers["Content-Type"] == STREAMING_CONTENT_TYPE
    prelude, body = posted.streamed()
    assert prelude == {
        "statusCode": 200,
        "headers": {"Content-Type": "application/zip", "Content-Disposition": 'attachment; filename="a.zip"'},
        "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
    }
    assert body == payload
    # Prelude, then the body in pieces: never the whole answer in one write.
    assert posted.chunks == 1 + 4


def test_a_text_answer_keeps_its_status_and_utf8_body(runtime_api: FakeRuntimeApi):
    error = {"error": {"code": "not_found", "message": "No such attachment: é"}}
    runtime_api.invoke(EVENT)
    answer = {"statusCode": 404, "headers": {"Content-Type": "application/json"}, "body": json.dumps(error)}
    handle_next(RuntimeApi(runtime_api.address), lambda event, context: answer, {})
    prelude, body = runtime_api.next_post().streamed()
    assert prelude["statusCode"] == 404
    assert json.loads(body) == error


def test_an_empty_body_is_just_the_prelude(runtime_api: FakeRuntimeApi):
    runtime_api.invoke(EVENT)
    handle_next(RuntimeApi(runtime_api.address), lambda event, context: {"statusCode": 204}, {})
    prelude, body = runtime_api.next_post().streamed()
    assert (prelude["statusCode"], body) == (204, b"")


def test_a_failing_handler_is_reported_and_the_next_invocation_is_served(runtime_api: FakeRuntimeApi):
    failing = runtime_api.invoke(EVENT)
    served = runtime_api.invoke(EVENT)
    runtime = RuntimeApi(runtime_api.address)
    calls = iter([RuntimeError("storage exploded"), binary_answer(b"ok")])

    def handler(event, context):
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    handle_next(runtime, handler, {})
    handle_next(runtime, handler, {})
    error = runtime_api.next_post()
    assert error.path == f"/2018-06-01/runtime/invocation/{failing}/error"
    assert error.headers["Lambda-Runtime-Function-Error-Type"] == "RuntimeError"
    report = json.loads(error.body)
    assert (report["errorType"], report["errorMessage"]) == ("RuntimeError", "storage exploded")
    assert any("storage exploded" in line for line in report["stackTrace"])
    answer = runtime_api.next_post()
    assert answer.path == f"/2018-06-01/runtime/invocation/{served}/response"
    assert answer.streamed()[1] == b"ok"


def test_the_handler_sees_the_event_and_lambdas_context(runtime_api: FakeRuntimeApi, monkeypatch):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "an earlier invocation")
    deadline = int(time.time() * 1000) + 20_000
    request_id = runtime_api.invoke(EVENT, deadline_ms=deadline, trace_id="Root=1-abc;Parent=def;Sampled=1")
    seen = {}

    def handler(event, context):
        seen.update(
            event=event,
            request_id=context.aws_request_id,
            arn=context.invoked_function_arn,
            name=context.function_name,
            memory=context.memory_limit_in_mb,
            remaining=context.get_remaining_time_in_millis(),
            trace=os.environ.get("_X_AMZN_TRACE_ID"),
        )
        return {"statusCode": 204}

    environ = {"AWS_LAMBDA_FUNCTION_NAME": "downloads", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"}
    handle_next(RuntimeApi(runtime_api.address), handler, environ)
    runtime_api.next_post()
    assert seen["event"] == EVENT
    assert seen["request_id"] == request_id
    assert seen["arn"] == "arn:aws:lambda:us-east-1:123456789012:function:downloads"
    assert (seen["name"], seen["memory"]) == ("downloads", 1024)
    assert 15_000 < seen["remaining"] <= 20_000
    assert seen["trace"] == "Root=1-abc;Parent=def;Sampled=1"
