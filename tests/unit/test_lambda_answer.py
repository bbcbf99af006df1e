"""The buffered API function's last guard: what Lambda could not return is answered as a 413."""

from __future__ import annotations

import json

from cairn.api.lambda_answer import LAMBDA_ANSWER_BYTES, carriable


def answer(body: object, **headers: list[str]) -> dict:
    return {"statusCode": 200, "body": body, "isBase64Encoded": False, "multiValueHeaders": headers}


def test_an_answer_lambda_can_carry_is_left_as_it_is():
    fitting = answer(json.dumps({"events": ["x" * 1_000_000]}), **{"Content-Type": ["application/json"]})
    assert carriable(fitting) is fitting


def test_an_answer_that_fits_only_before_escaping_is_refused_with_a_json_413():
    # Under the limit as UTF-8, but each quote is escaped once more in Lambda's proxy envelope.
    body = '"' * (LAMBDA_ANSWER_BYTES // 2 + 1)
    refused = carriable(
        answer(body, **{"Content-Type": ["text/plain"], "Content-Length": ["9"], "X-Request-Id": ["abc"]})
    )
    assert refused["statusCode"] == 413
    assert json.loads(refused["body"])["error"]["code"] == "payload_too_large"
    assert refused["multiValueHeaders"] == {"X-Request-Id": ["abc"], "Content-Type": ["application/json"]}
    assert len(json.dumps(refused)) < 1_000


def test_a_streamed_answer_is_left_to_the_streaming_function():
    streamed = answer(iter([b"chunk"] * 3))
    assert carriable(streamed) is streamed
