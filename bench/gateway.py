"""Call the API resolver with API Gateway REST proxy events, as Lambda does."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

CLIENT_IP = "198.51.100.7"


class Resolver(Protocol):
    """What the benchmarks call: a Powertools resolver, given a proxy event and a Lambda context."""

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


def invoke(
    app: Resolver,
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    json_body: Any = None,
) -> Reply:
    """Resolve one request and return its status and decoded JSON body."""
    response = app.resolve(proxy_event(method, path, query=query, headers=headers, json_body=json_body), {})
    text = response.get("body") or "null"
    return Reply(response["statusCode"], json.loads(text))


class StreamingContext:
    """The Lambda context of the streaming function's loop, which sends iterator bodies as they come."""

    streams_responses = True


def stream(app: Resolver, path: str, *, headers: dict[str, str]) -> Iterator[bytes]:
    """Resolve a `GET` as the streaming function does; the answer's body, chunk by chunk."""
    response = app.resolve(proxy_event("GET", path, headers=headers), StreamingContext())
    if response["statusCode"] != 200:
        raise RuntimeError(f"the stream was refused: {response['statusCode']} {response.get('body')}")
    return iter(response["body"])


def proxy_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    json_body: Any = None,
) -> dict[str, Any]:
    """The API Gateway REST proxy event of one request."""
    all_headers = {"Host": "cairn.bench", **(headers or {})}
    body = None
    if json_body is not None:
        body = json.dumps(json_body)
        all_headers["Content-Type"] = "application/json"
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {name: [value] for name, value in all_headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {"stage": "bench", "requestId": "bench", "identity": {"sourceIp": CLIENT_IP}},
        "body": body,
        "isBase64Encoded": False,
    }
