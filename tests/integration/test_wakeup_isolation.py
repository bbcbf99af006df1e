"""The dispatcher's Lambda path on DynamoDB Local with real webhooks: a receiver that never finishes
its answer holds up neither another address's wake-up nor the stream's batch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient
from tests.support.webhooks import Received, holding_receiver, receiver

# Far beyond any deadline used here: only reached when nothing cuts a delivery.
CEILING = 60.0
RETRY_SECONDS = 5


class Context:
    function_name = "wake"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:wake"
    aws_request_id = "req"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


@pytest.fixture
def handler():
    from cairn.entrypoints import wake_handler

    return wake_handler


def build(dynamodb_local, table: str, clock: FakeClock, **overrides: Any) -> tuple[Services, LambdaClient]:
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute=100_000,
        create_rate_per_minute=100_000,
        webhook_allow_local=True,
        wake_retry_base_seconds=RETRY_SECONDS,
        **overrides,
    )
    services = Services.build(settings, clock=clock)
    return services, LambdaClient(services)


class Agent:
    def __init__(self, api: LambdaClient) -> None:
        self.api = api
        self.created = api.provision()
        self.id = self.created["address"]["id"]
        self.token = self.created["credentials"]["read_token"]

    def subscribe(self, url: str) -> str:
        path = f"/api/v1/addresses/{self.id}/subscriptions"
        reply = self.api.request("POST", path, json_body={"target": {"kind": "webhook", "url": url}}, token=self.token)
        assert reply.status == 201, reply.text
        return reply.json()["subscription"]["id"]

    def post(self) -> dict[str, Any]:
        """A stream record of the new event, as the event source mapping hands it over."""
        sequence = self.api.post_inbox(self.created, {"type": "job.done"}).json()["event"]["sequence"]
        image = {"pk": {"S": f"A#{self.id}"}, "sk": {"S": f"E#{sequence:012d}"}, "type": {"S": "job.done"}}
        return {"eventName": "INSERT", "dynamodb": {"Keys": image, "NewImage": image, "SequenceNumber": str(sequence)}}

    def shown(self, sub_id: str) -> dict[str, Any]:
        path = f"/api/v1/addresses/{self.id}/subscriptions/{sub_id}"
        return self.api.request("GET", path, token=self.token).json()["subscription"]


def in_background(work: Callable[[], Any]) -> tuple[threading.Event, list[Any]]:
    done = threading.Event()
    box: list[Any] = []
    threading.Thread(target=lambda: (box.append(work()), done.set()), daemon=True).start()
    return done, box


def sequences(requests: list[Received]) -> list[int]:
    return [request.json()["sequence"] for request in requests]


def test_another_address_is_woken_while_a_receiver_holds_its_answer(
    dynamodb_local, local_table, clock: FakeClock, handler, monkeypatch: pytest.MonkeyPatch
):
    # A deadline longer than the test: only the ordering of arrivals decides.
    services, api = build(dynamodb_local, local_table, clock, webhook_timeout_seconds=60)
    monkeypatch.setattr(handler, "services", services)
    stalled, woken = Agent(api), Agent(api)
    with holding_receiver() as slow, receiver() as hook:
        stalled.subscribe(slow.url)
        woken.subscribe(hook.url)
        batch = {"Records": [stalled.post(), woken.post()]}
        done, answers = in_background(lambda: handler.stream_handler(batch, Context()))
        hook.wait_for(1, timeout=CEILING)
        # Whichever request arrived first, the slow one's answer had not ended (nor been cut) when the
        # other address was woken: only the test ends it, below.
        assert not (slow.cut.is_set() or slow.released.is_set()), "the other address waited for the slow receiver"
        assert slow.arrived.wait(CEILING), "the slow receiver's delivery was attempted too"
        slow.release()
        assert done.wait(CEILING)
    assert answers == [{"batchItemFailures": []}]


def test_a_delivery_is_cut_at_its_deadline_and_retried_in_order_without_failing_the_batch(
    dynamodb_local, local_table, clock: FakeClock, handler, monkeypatch: pytest.MonkeyPatch
):
    services, api = build(dynamodb_local, local_table, clock, webhook_timeout_seconds=1)
    monkeypatch.setattr(handler, "services", services)
    stalled, woken = Agent(api), Agent(api)
    with holding_receiver() as slow, receiver() as hook:
        stalled_sub = stalled.subscribe(slow.url)
        woken.subscribe(hook.url)
        batch = {"Records": [stalled.post(), stalled.post(), woken.post()]}
        done, answers = in_background(lambda: handler.stream_handler(batch, Context()))
        assert done.wait(CEILING), "the batch waits for a receiver that never finishes its answer"
        # The batch ended while the receiver still held its answer open: Cairn hung up on it.
        assert not slow.released.is_set()
        assert answers == [{"batchItemFailures": []}]  # nothing for Lambda to retry or send to the failure queue
        assert sequences(hook.received) == [1]
        shown = stalled.shown(stalled_sub)
        assert (shown["status"], shown["failures"], shown["delivered_through"]) == ("active", 1, 0)
        assert "deadline" in shown["attempts"][0]["error"]
        assert shown["next_retry_at"] is not None

        slow.release()
        clock.advance(RETRY_SECONDS)
        services.sweep.run()
    # The cut event first, then the one behind it: order per subscription holds.
    assert sequences(slow.received) == [1, 1, 2]
    assert stalled.shown(stalled_sub)["delivered_through"] == 2
