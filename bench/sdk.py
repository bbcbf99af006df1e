"""The SDK's own HTTP client, its requests resolved in a `CairnProcess` as API Gateway hands them to Lambda.

So the integrations (`CairnSession`, `CairnSaver`, Strands' repository) run
unchanged, every request they make goes through the resolver Lambda runs,
and the process's counted client sees each DynamoDB call an SDK method costs.
"""

from __future__ import annotations

import base64
import threading

import httpx

from bench.calls import CairnProcess
from bench.gateway import Resolver, proxy_event
from cairn.client.address import Address
from cairn.client.http import HttpClient

BASE_URL = "http://cairn.bench"


class ResolverTransport(httpx.BaseTransport):
    """Each request resolved by the process's resolver, and counted."""

    def __init__(self, process: CairnProcess) -> None:
        self._app: Resolver = process.app
        self._lock = threading.Lock()
        self._requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self._requests += 1
        headers = {name: value for name, value in request.headers.items() if name.lower() != "host"}
        event = proxy_event(request.method, request.url.path, query=dict(request.url.params) or None, headers=headers)
        event["body"] = request.read().decode() or None
        response = self._app.resolve(event, {})
        body = response.get("body") or ""
        content = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
        return httpx.Response(response["statusCode"], headers=response.get("headers") or {}, content=content)

    def take(self) -> int:
        """Requests made since the last `take`."""
        with self._lock:
            requests, self._requests = self._requests, 0
        return requests


def connect(process: CairnProcess, address_id: str, read_token: str) -> tuple[Address, ResolverTransport]:
    """An address known by id and token, as an agent holds it, whose requests `process` resolves."""
    transport = ResolverTransport(process)
    return Address.connect(BASE_URL, address_id, read_token, http=HttpClient(transport=transport)), transport
