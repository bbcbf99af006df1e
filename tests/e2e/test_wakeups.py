"""Wake-ups on `cairn serve`: the table's stream drives webhook deliveries to a receiver on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cairn.client import Address, SubscriptionNotFound, webhooks
from cairn.local.dynamodb_local import DynamoDBLocal
from tests.support.serve import ServeProcess, wait_until
from tests.support.webhooks import Received, receiver


@pytest.fixture
def server(dynamodb_local: DynamoDBLocal, local_table: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """`cairn serve` whose retries start after 1 s (then 2 s, 4 s, ...)."""
    env = {"CAIRN_WAKE_RETRY_BASE_SECONDS": "1"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=local_table, env=env) as running:
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
        reply = self.http.post(
            f"/api/v1/addresses/{self.id}/subscriptions", json={"target": {"kind": "webhook", "url": url}}, headers=self.auth
        )
        assert reply.status_code == 201, reply.text
        return reply.json()

    def post(self, count: int) -> list[int]:
        return [
            httpx.post(self.inbox_url, json={"type": "job.done", "data": {"n": n}}).json()["event"]["sequence"]
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
    assert agent.subscription(created["subscription"]["id"])["delivered_through"] == posted[-1]


def test_a_receiver_that_fails_three_times_then_recovers_gets_every_event(server: ServeProcess):
    agent = Agent(server)
    with receiver(statuses=[500, 500, 500]) as hook:
        created = agent.subscribe(hook.url)
        posted = agent.post(3)
        arrived = hook.wait_for(6, timeout=40)
    # The first event is tried until it passes; the others wait their turn behind it.
    assert sequences(arrived) == [posted[0]] * 4 + posted[1:]
    shown = agent.subscription(created["subscription"]["id"])
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
