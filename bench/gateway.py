"""Call the API resolver with API Gateway REST proxy events, as Lambda does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CLIENT_IP = "198.51.100.7"


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


def invoke(
    app,
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    json_body: Any = None,
) -> Reply:
    """Resolve one request and return its status and decoded JSON body."""
    all_headers = {"Host": "cairn.bench", **(headers or {})}
    body = None
    if json_body is not None:
        body = json.dumps(json_body)
        all_headers["Content-Type"] = "application/json"
    event = {
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
    response = app.resolve(event, {})
    text = response.get("body") or "null"
    return Reply(response["statusCode"], json.loads(text))
