"""`lambda_durable_callback` wake-ups on `cairn serve`: an inbox post or a mail completes a durable function's callback.

A durable execution runs only in Lambda, so `cairn serve`'s Lambda
client is pointed (`AWS_ENDPOINT_URL_LAMBDA`) at a stand-in on
127.0.0.1 that answers `SendDurableExecutionCallbackSuccess` as Lambda does:
a waiting callback completes once, with the result it is sent; any other id
is refused with `CallbackTimeoutException`. What crosses the wire is the
request Cairn's own botocore client signs and sends.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import smtplib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from cairn.client import Address
from tests.support.serve import ServeProcess, command_json, wait_until
from tests.support.tables import RunTables

_CALLBACK_PATH = re.compile(r"/2025-12-01/durable-execution-callbacks/([^/]+)/succeed")
_CLOSED = "The callback ID token has either expired or the callback associated with the token has already been closed."


@dataclass(frozen=True)
class Completion:
    callback_id: str
    authorization: str
    result: Any


class DurableLambda:
    """Lambda's callback endpoint, as a durable function waiting on callbacks sees it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[str] = set()
        self.completed: list[Completion] = []
        self.refused: list[str] = []

    def create_callback(self) -> str:
        """A new waiting callback's id (base64, as Lambda makes them)."""
        callback_id = base64.b64encode(secrets.token_bytes(30)).decode()
        with self._lock:
            self._waiting.add(callback_id)
        return callback_id

    def results(self, callback_id: str) -> list[Any]:
        with self._lock:
            return [item.result for item in self.completed if item.callback_id == callback_id]

    def succeed(self, callback_id: str, authorization: str, body: bytes) -> bool:
        with self._lock:
            if callback_id not in self._waiting:
                self.refused.append(callback_id)
                return False
            self._waiting.discard(callback_id)
            self.completed.append(Completion(callback_id, authorization, json.loads(body)))
            return True


@pytest.fixture(scope="module")
def durable_lambda() -> Iterator[tuple[DurableLambda, str]]:
    lambda_ = DurableLambda()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            found = _CALLBACK_PATH.fullmatch(self.path)
            if found and lambda_.succeed(unquote(found.group(1)), self.headers.get("Authorization", ""), body):
                self._answer(200, {}, {})
                return
            error = {"x-amzn-ErrorType": "CallbackTimeoutException"}
            self._answer(400, error, {"Type": "User", "message": _CLOSED})

        def _answer(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield lambda_, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served(
    run_tables: RunTables, durable_lambda: tuple[DurableLambda, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    """One `cairn serve` that completes durable callbacks through the stand-in; its tests use addresses of their own."""
    _, endpoint = durable_lambda
    env = {
        "AWS_ENDPOINT_URL_LAMBDA": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "cairn-test-secret",
        "CAIRN_WAKE_TARGET_ARNS": json.dumps(
            ["arn:aws:lambda:us-east-1:123456789012:function:release:*/durable-execution/*"]
        ),
    }
    table = run_tables.streamed()
    with ServeProcess(
        tmp_path_factory.mktemp("durable"), dynamodb_endpoint=run_tables.database.endpoint, table=table, env=env
    ) as server:
        yield server


def callback_target(callback_id: str) -> dict[str, str]:
    return {"kind": "lambda_durable_callback", "callback_id": callback_id}


def test_an_inbox_post_resumes_the_waiting_function_once(
    served: ServeProcess, durable_lambda: tuple[DurableLambda, str]
):
    lambda_, _ = durable_lambda
    callback_id = lambda_.create_callback()
    with Address.provision(served.base_url, expires_in=3600) as address:
        created = address.subscriptions.create(callback_target(callback_id), types=["review.done"])
        sub_id = created["subscription"]["id"]
        assert created["subscription"]["target"] == {"kind": "lambda_durable_callback"}
        address.inbox.post({"type": "review.started"})
        address.inbox.post({"type": "review.done", "data": {"approved": True}})
        assert wait_until(lambda: address.subscriptions.get(sub_id)["status"] == "ended")
        (result,) = lambda_.results(callback_id)
        assert (result["address_id"], result["subscription_id"], result["sequence"]) == (address.id, sub_id, 2)
        assert (result["event"]["type"], result["event"]["data"]) == ("review.done", {"approved": True})
        # Signed as AWS requires: a SigV4 request for Lambda.
        (completion,) = [item for item in lambda_.completed if item.callback_id == callback_id]
        assert completion.authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/us-east-1/lambda/aws4_request" in completion.authorization
        # One-shot: the next matching event is not sent (the stand-in would refuse it, as Lambda would).
        address.inbox.post({"type": "review.done", "data": {"approved": False}})
        assert not wait_until(
            lambda: callback_id in lambda_.refused or len(lambda_.results(callback_id)) > 1, timeout=3
        )


def test_a_mail_reply_resumes_the_waiting_function(served: ServeProcess, durable_lambda: tuple[DurableLambda, str]):
    lambda_, _ = durable_lambda
    callback_id = lambda_.create_callback()
    created = httpx.post(f"{served.base_url}/api/v1/addresses", json={}).json()
    token = created["credentials"]["read_token"]
    subscriptions_url = f"{served.base_url}/api/v1/addresses/{created['address']['id']}/subscriptions"
    reply = httpx.post(
        subscriptions_url,
        json={"target": callback_target(callback_id), "types": ["email.received"]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 201, reply.text
    message = EmailMessage()
    message["From"] = "grace@example.org"
    message["To"] = created["address"]["email"]
    message["Subject"] = "Re: Ship 1.4?"
    message.set_content("Yes, ship it.")
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
        assert smtp.send_message(message) == {}
    assert wait_until(lambda: len(lambda_.results(callback_id)) == 1)
    (result,) = lambda_.results(callback_id)
    assert result["event"]["type"] == "email.received"
    assert result["event"]["data"]["text"] == "Yes, ship it.\n"


def test_a_callback_that_no_longer_waits_fails_the_subscription_with_the_reason(
    served: ServeProcess, durable_lambda: tuple[DurableLambda, str], tmp_path: Path
):
    lambda_, _ = durable_lambda
    # Subscribed from the command line; the function's wait has already timed out at Lambda.
    home = tmp_path / "cairn-home"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_URL": served.base_url}

    def cli(*args: str) -> dict[str, Any]:
        answer: dict[str, Any] = command_json(list(args), env)
        return answer

    inbox_url = cli("provision", "release")["inbox_url"]
    expired = "ZXhwaXJlZC1jYWxsYmFjaw=="
    sub_id = cli("subscriptions", "create", "release", "--durable-callback", expired)["subscription"]["id"]
    httpx.post(inbox_url, json={"type": "review.done"})

    def shown() -> dict[str, Any]:
        (item,) = [item for item in cli("subscriptions", "list", "release")["subscriptions"] if item["id"] == sub_id]
        return item

    assert wait_until(lambda: shown()["status"] == "failed")
    (attempt,) = shown()["attempts"]
    assert attempt["error"] == f"CallbackTimeoutException: {_CLOSED}"
    assert expired in lambda_.refused
    events = cli("events", "poll", "release", "--after", "0")["events"]
    (failed,) = [event for event in events if event["type"] == "subscription.failed"]
    assert failed["data"]["reason"] == f"CallbackTimeoutException: {_CLOSED}"
    assert failed["data"]["subscription_id"] == sub_id
