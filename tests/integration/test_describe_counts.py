"""Describing an address reads its head, not its feed, and counts against its rate (DynamoDB Local)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.feed_counts import BLOCK
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, path_of

RETENTION = 3600


class ReadMeter:
    """The DynamoDB calls one client makes, and the items they bring back."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls: list[str] = []
        self.items = 0
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model, parsed: dict[str, Any], **_: Any) -> None:
        self.calls.append(model.name)
        self.items += len(parsed.get("Items", [])) + ("Item" in parsed)
        self.items += (
            sum(len(found) for found in parsed.get("Responses", {}).values()) if model.name == "BatchGetItem" else 0
        )

    def measure(self, action) -> tuple[list[str], int]:
        self.calls, self.items = [], 0
        action()
        return self.calls, self.items


@pytest.fixture
def metered(dynamodb_local, clock: FakeClock) -> tuple[LambdaClient, ReadMeter]:
    table = f"cairn-describe-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute=10_000,
        create_rate_per_minute=10_000,
        event_retention_seconds=RETENTION,
        max_events=300,
        owner_reserved_events=10,
    )
    client = make_client(settings)
    ensure_table(client, table, stream=False)
    meter = ReadMeter(client)
    return LambdaClient(Services.build(settings, client=client, waiter=NotifyingWaiter(), clock=clock)), meter


def describe(api: LambdaClient, created: dict) -> dict:
    reply = api.request("GET", path_of(created["endpoints"]["address_url"]), token=created["credentials"]["read_token"])
    assert reply.status == 200, reply.text
    return reply.json()["feed"]


def ack(api: LambdaClient, created: dict, event_id: str) -> int:
    url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/ack"
    return api.request("POST", url, token=created["credentials"]["read_token"]).status


def test_describe_reads_the_same_whatever_the_feed_holds(metered):
    api, meter = metered
    small, large = api.provision(), api.provision()
    for n in range(3):
        api.post_inbox(small, {"n": n})
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda n: api.post_inbox(large, {"n": n, "pad": "x" * 50_000}), range(200)))
    small_calls, small_items = meter.measure(lambda: describe(api, small))
    large_calls, large_items = meter.measure(lambda: describe(api, large))
    assert large_calls == small_calls and large_items == small_items
    assert "Query" not in large_calls, "no event is read"
    assert describe(api, large)["events"] == 200


def test_describe_figures_follow_appends_acks_trims_and_expiry(metered, clock: FakeClock):
    api, _ = metered
    created = api.provision()
    state_url = path_of(created["endpoints"]["state_url"])
    token = created["credentials"]["read_token"]
    for n in range(70):
        assert api.post_inbox(created, {"n": n}).status == 202
    assert api.request("PUT", f"{state_url}/k", json_body={"value": 1}, token=token).status == 201
    events = api.poll(created, limit=1000).json()["events"]
    assert describe(api, created) | {"max_events": None} == {
        "events": 71,
        "unacknowledged": 71,
        "last_sequence": 71,
        "max_events": None,
    }
    for event in events[:40]:
        assert ack(api, created, event["id"]) == 200
    assert ack(api, created, events[0]["id"]) == 200, "a repeat counts once"
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(lambda event: ack(api, created, event["id"]), events[40:50])) == {200}
    assert (describe(api, created)["events"], describe(api, created)["unacknowledged"]) == (71, 21)
    events_path = path_of(created["endpoints"]["events_url"])
    trimmed = api.request("DELETE", f"{events_path}?through=45", token=token)
    assert trimmed.json() == {"trimmed": 45, "trimmed_through": 45}
    assert (describe(api, created)["events"], describe(api, created)["unacknowledged"]) == (26, 21)
    url = f"{events_path}?through=60&include_unacknowledged=true"
    assert api.request("DELETE", url, token=token).status == 200
    assert (describe(api, created)["events"], describe(api, created)["unacknowledged"]) == (11, 11)
    clock.advance(RETENTION + 1)
    assert (describe(api, created)["events"], describe(api, created)["unacknowledged"]) == (0, 0)
    api.post_inbox(created, {"after": "expiry"})
    # Counted in blocks: expired events of the new event's block count until its last one expires.
    assert 1 <= describe(api, created)["events"] <= BLOCK


def test_describe_counts_against_the_address_rate(dynamodb_local, local_table, clock: FakeClock):
    from tests.support.lambda_client import make_services

    api = LambdaClient(
        make_services(
            table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock, poll_rate_per_minute=2
        )
    )
    created = api.provision()
    url, token = path_of(created["endpoints"]["address_url"]), created["credentials"]["read_token"]
    assert [api.request("GET", url, token=token).status for _ in range(2)] == [200, 200]
    refused = api.request("GET", url, token=token)
    assert refused.status == 429 and refused.error_code == "rate_limited"
    assert api.poll(created).status == 429, "describes and polls share the rate"
    clock.advance(60)
    assert api.request("GET", url, token=token).status == 200


def test_describe_never_reports_more_events_than_its_last_sequence(dynamodb_local, metered, clock: FakeClock):
    """An append that commits between the describe's admission and its count is counted with its
    sequence, or not at all: the figures come from one read of the head."""
    api, meter = metered
    created = api.provision()
    api.post_inbox(created, {"n": 0})
    table = api.services.settings.table_name
    other = LambdaClient(
        Services.build(
            Settings(table_name=table, dynamodb_endpoint=dynamodb_local.endpoint, poll_rate_per_minute=10_000),
            waiter=NotifyingWaiter(),
            clock=clock,
        )
    )
    armed = [True]

    def append_after_admission(model, **_: Any) -> None:
        # The describe's first write is its admission (one read counted on the head).
        if model.name == "UpdateItem" and armed[0]:
            armed[0] = False
            assert other.post_inbox(created, {"n": 1}).status == 202

    meter.client.meta.events.register("after-call.dynamodb", append_after_admission)
    feed = describe(api, created)
    assert not armed[0], "the append ran inside the describe"
    assert feed["events"] <= feed["last_sequence"]
    assert (feed["events"], feed["last_sequence"]) == (2, 2)
