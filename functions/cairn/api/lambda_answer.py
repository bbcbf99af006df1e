"""The last guard of the buffered API function: an answer Lambda could not return becomes a 413."""

from __future__ import annotations

from typing import Any

from cairn import jsontext

# What a buffered Lambda function may answer (its proxy answer as JSON), less room for the headers.
LAMBDA_ANSWER_BYTES = 6_291_456
_HEADERS_ROOM = 65_536
_TOO_LARGE = jsontext.canonical(
    {
        "error": {
            "code": "payload_too_large",
            "message": "The answer is more than one response can carry: ask for less at once (a smaller limit).",
        }
    }
)
_BODY_HEADERS = frozenset({"content-type", "content-encoding", "content-length"})


def carriable(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, or a 413 in its place when a buffered Lambda function could not return it (API Gateway
    would answer 502).

    Every read that can grow pages its answer within its own budget; this is
    the last guard, for a read a client's stored values made larger than any
    budget foresaw. The streaming function carries up to 20 MB and `cairn
    serve` any size: they answer what the resolver gives.
    """
    body = answer.get("body")
    if not isinstance(body, str) or jsontext.sent_size(body) + _HEADERS_ROOM <= LAMBDA_ANSWER_BYTES:
        return answer  # a streamed answer's body is its chunks, within the streaming function's own limit
    kept = {name: values for name, values in (answer.get("multiValueHeaders") or {}).items()}
    headers = {name: values for name, values in kept.items() if name.lower() not in _BODY_HEADERS}
    headers["Content-Type"] = ["application/json"]
    return {"statusCode": 413, "body": _TOO_LARGE, "isBase64Encoded": False, "multiValueHeaders": headers}
