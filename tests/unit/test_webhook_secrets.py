"""Webhook signing secrets are stored sealed by the server secret and opened only to sign a delivery.

On moto, with the transport the services build (a real HTTP POST to a
receiver on 127.0.0.1): what a copy of the table holds, and what the
receiver can verify with the secret its owner was shown.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from cairn.dynamodb.client import make_client
from cairn.dynamodb.subscription_items import SECRETS, subscription_key
from cairn.wakeups.models import EventNotice
from cairn.wakeups.webhook import UNREADABLE_SECRET
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient
from tests.support.webhooks import Received, receiver


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock, webhook_allow_local=True)


class Owner:
    def __init__(self, api: LambdaClient) -> None:
        self.api = api
        self.created = api.provision()
        self.address_id = self.created["address"]["id"]
        self.base = f"/api/v1/addresses/{self.address_id}/subscriptions"

    def call(self, method: str, path: str, **body: Any) -> dict[str, Any]:
        token = self.created["credentials"]["read_token"]
        reply = self.api.request(method, self.base + path, json_body=body or None, token=token)
        assert reply.status in (200, 201), reply.text
        answer: dict[str, Any] = reply.json()
        return answer

    def post(self) -> None:
        """An event, dispatched as the stream would."""
        sequence = self.api.post_inbox(self.created, {"type": "job.done"}).json()["event"]["sequence"]
        notice = EventNotice(self.address_id, sequence, "job.done", str(sequence))
        assert not self.api.services.dispatcher.dispatch([notice])

    def stored(self, subscription_id: str) -> list[dict[str, Any]]:
        client = make_client(self.api.services.settings)
        item = client.get_item(
            TableName=self.api.services.settings.table_name, Key=subscription_key(self.address_id, subscription_id)
        )["Item"]
        return list(json.loads(item[SECRETS]["S"]))


def verifies(secret: str, delivery: Received) -> bool:
    try:
        Webhook(secret).verify(delivery.body, delivery.headers)
    except Exception:  # noqa: BLE001 (any refusal)
        return False
    return True


def test_the_table_holds_no_webhook_secret_and_deliveries_verify_with_the_one_shown(api: LambdaClient):
    owner = Owner(api)
    with receiver() as hook:
        created = owner.call("POST", "", target={"kind": "webhook", "url": hook.url})
        sub_id, first = created["subscription"]["id"], created["secret"]
        owner.post()
        rotated = owner.call("POST", f"/{sub_id}/rotate")["secret"]
        owner.post()
        deliveries = hook.wait_for(2)
    stored = owner.stored(sub_id)
    assert len(stored) == 2
    assert all(not entry["secret"].startswith("whsec_") for entry in stored)
    assert all(secret not in json.dumps(stored) for secret in (first, rotated))
    assert verifies(first, deliveries[0])
    # During the rotation's overlap both secrets sign: the receiver may hold either.
    assert verifies(first, deliveries[1]) and verifies(rotated, deliveries[1])


def test_a_secret_stored_as_given_before_sealing_still_signs(api: LambdaClient):
    owner = Owner(api)
    with receiver() as hook:
        sub_id = owner.call("POST", "", target={"kind": "webhook", "url": hook.url})["subscription"]["id"]
        legacy = "whsec_" + "QUJD" * 11
        client = make_client(api.services.settings)
        client.update_item(
            TableName=api.services.settings.table_name,
            Key=subscription_key(owner.address_id, sub_id),
            UpdateExpression="SET #secrets = :secrets",
            ExpressionAttributeNames={"#secrets": SECRETS},
            ExpressionAttributeValues={":secrets": {"S": json.dumps([{"secret": legacy, "expires_at": None}])}},
        )
        owner.post()
        (delivery,) = hook.wait_for(1)
    assert verifies(legacy, delivery)


def test_a_secret_sealed_under_another_server_secret_sends_nothing_until_rotated(moto_env: None, clock: FakeClock):
    before = LambdaClient.on_moto(clock, webhook_allow_local=True)
    owner = Owner(before)
    with receiver() as hook:
        sub_id = owner.call("POST", "", target={"kind": "webhook", "url": hook.url})["subscription"]["id"]
        # The same table, served under a new server secret.
        owner.api = LambdaClient.on_moto(clock, webhook_allow_local=True, server_secret="n" * 43)
        owner.post()
        attempts = owner.call("GET", f"/{sub_id}")["subscription"]["attempts"]
        assert [(attempt["outcome"], attempt["error"]) for attempt in attempts] == [("failed", UNREADABLE_SECRET)]
        assert hook.received == []
        secret = owner.call("POST", f"/{sub_id}/rotate")["secret"]
        clock.advance(owner.api.services.settings.wake_retry_base_seconds + 1)  # its retry is due
        owner.api.services.sweep.run()
        (delivery,) = hook.wait_for(1)
    assert verifies(secret, delivery)
