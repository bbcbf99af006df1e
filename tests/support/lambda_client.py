"""Call the API resolver the way API Gateway does, without a server."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from cairn.api.app import create_app
from cairn.api.lambda_answer import carriable
from cairn.clock import Clock
from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.services import Services
from cairn.settings import Settings

# What a buffered Lambda function may answer: its proxy answer (status, headers, body) as JSON text.
LAMBDA_ANSWER_LIMIT = 6 * 1024 * 1024

# The deployment secret of the tests' services (`cairn.server_secret`).
SERVER_SECRET = "tests-server-secret-0123456789abcdefghijklmnopqrstuvwxyz"
# What the tests' deployments allow wake-ups to call back: the durable executions of one function.
DURABLE_EXECUTIONS = "arn:aws:lambda:us-east-1:123456789012:function:release:*/durable-execution/*"


def settings_for_tests(**overrides: Any) -> Settings:
    """The tests' settings: their table, their server secret, and rates no test reaches unless it asks."""
    relaxed = {"poll_rate_per_minute": 10_000, "create_rate_per_minute": 10_000}
    return Settings(**{"table_name": "cairn-test", "server_secret": SERVER_SECRET, **relaxed, **overrides})


def make_services(*, clock: Clock, waiter=None, mailer=None, runtime=None, **overrides: Any) -> Services:
    settings = settings_for_tests(**overrides)
    return Services.build(settings, waiter=waiter or NotifyingWaiter(), clock=clock, mailer=mailer, runtime=runtime)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str
    base64_encoded: bool = False

    @property
    def content(self) -> bytes:
        """The body as bytes, decoded when the resolver sent it base64-encoded."""
        return base64.b64decode(self.text) if self.base64_encoded else self.text.encode()

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def error_code(self) -> str | None:
        body = self.json()
        return body.get("error", {}).get("code") if isinstance(body, dict) else None


@dataclass
class LambdaClient:
    services: Services
    source_ip: str = "203.0.113.7"
    app: Any = field(init=False)

    def __post_init__(self) -> None:
        self.app = create_app(self.services)

    @classmethod
    def on_moto(cls, clock: Clock, **overrides: Any) -> LambdaClient:
        services = make_services(clock=clock, **overrides)
        ensure_table(make_client(services.settings), services.settings.table_name)
        return cls(services)

    @classmethod
    def in_memory(cls, clock: Clock, **overrides: Any) -> LambdaClient:
        """The resolver on the in-memory address ports (`Services.in_memory`): no moto, no table."""
        return cls(Services.in_memory(settings_for_tests(**overrides), waiter=NotifyingWaiter(), clock=clock))

    def request(self, method: str, url: str, **parts: Any) -> Reply:
        """Resolve the request `event(method, url, **parts)` describes, as the buffered API function does."""
        return self._reply(carriable(self.app.resolve(self.event(method, url, **parts), {})))

    def sent(self, method: str, url: str, **parts: Any) -> tuple[Reply, int]:
        """The reply, and the bytes of the answer as Lambda writes it (`LAMBDA_ANSWER_LIMIT` at most)."""
        response = carriable(self.app.resolve(self.event(method, url, **parts), {}))
        return self._reply(response), len(json.dumps(response))

    @staticmethod
    def _reply(response: dict[str, Any]) -> Reply:
        headers_out = {k: v for k, v in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers_out[name] = values[-1]
        return Reply(
            response["statusCode"], headers_out, response.get("body") or "", response.get("isBase64Encoded", False)
        )

    def event(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        body: str | bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = None,
    ) -> dict[str, Any]:
        """The API Gateway REST proxy event for this request."""
        parts = urlsplit(url)
        query = dict(pair.split("=", 1) for pair in parts.query.split("&") if pair) if parts.query else None
        all_headers = {"Host": "cairn.test", **(headers or {})}
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        if json_body is not None:
            body = json.dumps(json_body)
            all_headers.setdefault("Content-Type", "application/json")
        encoded = isinstance(body, bytes)
        if encoded:
            body = base64.b64encode(body).decode()
        return {
            "resource": "/{proxy+}",
            "path": parts.path,
            "httpMethod": method,
            "headers": all_headers,
            "multiValueHeaders": {name: [value] for name, value in all_headers.items()},
            "queryStringParameters": query,
            "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
            "pathParameters": None,
            "stageVariables": None,
            "requestContext": {"stage": "test", "requestId": "req", "identity": {"sourceIp": self.source_ip}},
            "body": body,
            "isBase64Encoded": encoded,
        }

    def handle(self, request: httpx.Request) -> httpx.Response:
        """An httpx transport handler: the request goes through the resolver."""
        headers = {name: value for name, value in request.headers.items() if name.lower() != "host"}
        reply = self.request(request.method, str(request.url), body=request.content or None, headers=headers)
        return httpx.Response(reply.status, headers=reply.headers, content=reply.text.encode())

    # -- conveniences used across tests --------------------------------------

    def provision(self, **body: Any) -> dict[str, Any]:
        reply = self.request("POST", "/api/v1/addresses", json_body=body)
        assert reply.status == 201, reply.text
        return reply.json()

    def post_inbox(self, created: dict[str, Any], payload: Any, key: str | None = None) -> Reply:
        headers = {"Idempotency-Key": key} if key is not None else None
        return self.request("POST", path_of(created["endpoints"]["inbox_url"]), json_body=payload, headers=headers)

    def poll(self, created: dict[str, Any], **query: Any) -> Reply:
        url = path_of(created["endpoints"]["events_url"])
        if query:
            url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        return self.request("GET", url, token=created["credentials"]["read_token"])


def path_of(url: str) -> str:
    return urlsplit(url).path
