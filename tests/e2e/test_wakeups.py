"""Wake-ups on `cairn serve`: the table's stream drives webhook deliveries to a receiver on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cairn.client import Address, SubscriptionNotFound, webhooks
from cairn.local.dynamodb_local import DynamoDBLocal
from tests.support.serve import ServeProcess, wait_until
from tests.support.webhooks import Received, holding_receiver, receiver


@pytest.fixture
def server(dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """`cairn serve` whose retries start after 1 s (then 2 s, 4 s, ...), and whose delivery deadline
    (60 s) outlasts what a test waits for: a held answer is cut by nothing but the test."""
    env = {"CAIRN_WAKE_RETRY_BASE_SECONDS": "1", "CAIRN_WEBHOOK_TIMEOUT_SECONDS": "60"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as running:
        yield running


class Agent:
    """An address on the server, used over plain HTTP."""

    def __init__(self, server: ServeProcess) -> None:
        self.http = server.client()
        created = self.http.post("/api/v1/addresses", json={}).json()
        self.id = created["address"]["id"]
        self.inbox_url = created["endpoints"]["inbox_url"]
        self.auth = {"Authorization": f"Bearer {created['credentials']['read_token']}"}

    def subscribe(self, url: str) -> dict[str, Any]:
        reply = self.try_subscribe(url)
        assert reply.status_code == 201, reply.text
        return reply.json()

    def try_subscribe(self, url: str) -> httpx.Response:
        return self.http.post(
            f"/api/v1/addresses/{self.id}/subscriptions",
            json={"target": {"kind": "webhook", "url": url}},
            headers=self.auth,
        )

    def post(self, count: int) -> list[int]:
        return [
            self.http.post(self.inbox_url, json={"type": "job.done", "data": {"n": n}}).json()["event"]["sequence"]
            for n in range(count)
        ]

    def subscription(self, sub_id: str) -> dict[str, Any]:
        path = f"/api/v1/addresses/{self.id}/subscriptions/{sub_id}"
        return self.http.get(path, headers=self.auth).json()["subscription"]


def sequences(requests: list[Received]) -> list[int]:
    return [request.json()["sequence"] for request in requests]


def test_each_posted_event_arrives_once_in_order_and_signed(server: ServeProcess):
    agent = Agent(server)
    with receiver() as hook:
        created = agent.subscribe(hook.url)
        posted = agent.post(6)
        arrived = hook.wait_for(6)
        # Nothing more comes: each event once.
        assert not wait_until(lambda: len(hook.received) > 6, timeout=2)
    assert sequences(arrived) == posted
    for request in arrived:
        payload = Webhook(created["secret"]).verify(request.body, request.headers)
        assert payload["address_id"] == agent.id
        assert request.headers["webhook-id"] == payload["event"]["id"]
    wrong = agent.subscribe("http://127.0.0.1:9/other")["secret"]
    with pytest.raises(WebhookVerificationError):
        Webhook(wrong).verify(arrived[0].body, arrived[0].headers)
    # The server records a delivery after its receiver answers it: wait for the record, not the request.
    sub_id = created["subscription"]["id"]
    assert wait_until(lambda: agent.subscription(sub_id)["delivered_through"] == posted[-1], timeout=10)


def test_a_receiver_that_fails_three_times_then_recovers_gets_every_event(server: ServeProcess):
    agent = Agent(server)
    with receiver(statuses=[500, 500, 500]) as hook:
        created = agent.subscribe(hook.url)
        posted = agent.post(3)
        arrived = hook.wait_for(6, timeout=40)
    # The first event is tried until it passes; the others wait their turn behind it.
    assert sequences(arrived) == [posted[0]] * 4 + posted[1:]
    # Each attempt is recorded after its receiver answered it: wait for the last one's record.
    sub_id = created["subscription"]["id"]
    assert wait_until(lambda: len(agent.subscription(sub_id)["attempts"]) == 6, timeout=10)
    shown = agent.subscription(sub_id)
    assert shown["status"] == "active"
    assert [attempt["status_code"] for attempt in reversed(shown["attempts"])] == [500, 500, 500, 200, 200, 200]


def test_410_ends_the_subscription(server: ServeProcess):
    agent = Agent(server)
    with receiver(statuses=[410]) as hook:
        created = agent.subscribe(hook.url)
        agent.post(1)
        hook.wait_for(1)
        sub_id = created["subscription"]["id"]
        assert wait_until(lambda: agent.subscription(sub_id)["status"] == "ended")
        agent.post(1)
        assert not wait_until(lambda: len(hook.received) > 1, timeout=2)


def test_the_sdk_subscribes_and_a_receiver_verifies_with_it(server: ServeProcess):
    with Address.provision(server.base_url, expires_in=3600) as address, receiver() as hook:
        created = address.subscriptions.create({"kind": "webhook", "url": hook.url}, types=["job.done"])
        secret, sub_id = created["secret"], created["subscription"]["id"]
        address.inbox.post({"type": "job.skipped"})
        address.inbox.post({"type": "job.done", "data": {"ok": True}})
        (request,) = hook.wait_for(1)
        payload = webhooks.verify(request.headers, request.body, secret)
        assert (payload["type"], payload["sequence"], payload["event"]["data"]) == ("job.done", 2, {"ok": True})
        rotated = address.subscriptions.rotate(sub_id)
        with pytest.raises(webhooks.InvalidSignature):
            webhooks.verify(request.headers, request.body, rotated["secret"])
        assert address.subscriptions.test(sub_id)["outcome"] == "delivered"
        _, tested = hook.wait_for(2)
        # During the overlap both secrets verify.
        for key in (secret, rotated["secret"]):
            assert webhooks.verify(tested.headers, tested.body, key)["type"] == "subscription.test"
        assert [item["id"] for item in address.subscriptions.list()] == [sub_id]
        address.subscriptions.delete(sub_id)
        with pytest.raises(SubscriptionNotFound):
            address.subscriptions.get(sub_id)


def test_a_receiver_that_never_finishes_its_answer_delays_no_other_address(server: ServeProcess):
    stalled, woken = Agent(server), Agent(server)
    with holding_receiver() as slow, receiver() as hook:
        stalled.subscribe(slow.url)
        woken.subscribe(hook.url)
        stalled.post(1)
        assert slow.arrived.wait(60)
        posted = woken.post(1)
        arrived = hook.wait_for(1, timeout=60)
        # Woken while the other address's receiver still held its answer open.
        assert slow.holding
    assert sequences(arrived) == posted


def test_a_webhook_cannot_target_cairn_serve_itself(server: ServeProcess):
    agent = Agent(server)
    for url in (
        agent.inbox_url,
        f"http://localhost:{server.port}/api/v1/inbox/{agent.id}/x",
        f"http://127.0.0.1:{server.port}/",
    ):
        reply = agent.try_subscribe(url)
        assert reply.status_code == 400, (url, reply.text)
        assert reply.json()["error"]["code"] == "target_refused"
    assert (
        agent.http.get(f"/api/v1/addresses/{agent.id}/subscriptions", headers=agent.auth).json()["subscriptions"] == []
    )


class Relay:
    """Passes each delivery on to `to`, headers and all (as a name pointed at Cairn would), and answers
    with the status it got."""

    def __init__(self, to: str) -> None:
        self.to = to
        self.url = ""
        self.statuses: list[int] = []
        self._lock = threading.Lock()

    def forward(self, body: bytes, headers: dict[str, str]) -> int:
        status = httpx.post(self.to, content=body, headers=headers).status_code
        with self._lock:
            self.statuses.append(status)
        return status


@contextmanager
def relay(to: str) -> Iterator[Relay]:
    target = Relay(to)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            passed = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            self.send_response(target.forward(body, passed))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    target.url = f"http://127.0.0.1:{server.server_address[1]}/relay"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield target
    finally:
        server.shutdown()
        server.server_close()


def test_a_wake_up_relayed_into_a_cairn_inbox_ends_its_subscription_instead_of_feeding_itself(server: ServeProcess):
    agent = Agent(server)
    with relay(agent.inbox_url) as loop:
        sub_id = agent.subscribe(loop.url)["subscription"]["id"]
        agent.post(1)
        assert wait_until(lambda: agent.subscription(sub_id)["status"] == "ended", timeout=30)
    assert loop.statuses == [410]
    shown = agent.subscription(sub_id)
    assert (shown["attempts"][0]["outcome"], shown["attempts"][0]["status_code"]) == ("ended", 410)
    events = agent.http.get(f"/api/v1/addresses/{agent.id}/events", headers=agent.auth).json()["events"]
    assert [event["type"] for event in events] == ["job.done"]
