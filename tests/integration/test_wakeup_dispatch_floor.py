"""The wake-up dispatcher reads nothing for an address nobody subscribes to (DynamoDB Local, its stream).

An append marks its events `unsubscribed` when the address's head counts
no subscription, under the condition that it still counts none; creating a
subscription raises that count in the transaction that checks the
subscription's cursor. So a marked event is one no subscription is owed,
whichever commits first, and the dispatcher passes it by without a read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cairn.dynamodb import address_items, keys
from cairn.dynamodb.address_items import SUBSCRIBERS, UNCOUNTED_SUBSCRIBERS
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import key
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.models import Delivery, EventNotice, Outcome, Subscription
from tests.support import streams
from tests.support.lambda_client import LambdaClient
from tests.support.processes import process_context

HOOK = "http://127.0.0.1:9/hook"


class Recording:
    """A target that records the sequences it is sent."""

    def __init__(self) -> None:
        self.sequences: list[int] = []

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        if delivery.sequence is not None:
            self.sequences.append(delivery.sequence)
        return Outcome(delivered=True, status_code=200)


def settings_for(endpoint: str, table: str) -> Settings:
    return Settings(
        table_name=table,
        dynamodb_endpoint=endpoint,
        poll_rate_per_minute=100_000,
        create_rate_per_minute=100_000,
        webhook_allow_local=True,
    )


def process(endpoint: str, table: str, transport: Recording | None = None) -> tuple[Services, Counter[str]]:
    """Services as a new process has them, their DynamoDB calls counted by operation."""
    settings = settings_for(endpoint, table)
    client = make_client(settings)
    calls: Counter[str] = Counter()
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
    return Services.build(settings, client=client, wake_transport=transport), calls


def stream_notices(endpoint: str, table: str) -> list[EventNotice]:
    return streams.stream_notices(settings_for(endpoint, table))


def subscribe(api: LambdaClient, created: dict[str, Any]) -> dict[str, Any]:
    """Create a webhook subscription, retrying a busy answer as a client does (writers may hold the head)."""
    for _ in range(20):
        reply = api.request(
            "POST",
            f"/api/v1/addresses/{created['address']['id']}/subscriptions",
            json_body={"target": {"kind": "webhook", "url": HOOK}},
            token=created["credentials"]["read_token"],
        )
        if reply.status != 503:
            break
    assert reply.status == 201, reply.text
    return dict(reply.json()["subscription"])


def test_events_nobody_subscribes_to_cost_the_dispatcher_no_read(dynamodb_local, streamed_table: str) -> None:
    poster, _ = process(dynamodb_local.endpoint, streamed_table)
    api = LambdaClient(poster)
    quiet, watched = api.provision(), api.provision()
    subscribe(api, watched)
    for n in range(3):
        api.post_inbox(quiet, {"type": "job.done", "data": {"n": n}})
        api.post_inbox(watched, {"type": "job.done", "data": {"n": n}})

    notices = stream_notices(dynamodb_local.endpoint, streamed_table)
    by_address = {created["address"]["id"]: created for created in (quiet, watched)}
    assert sorted((notice.address_id, notice.unsubscribed) for notice in notices) == sorted(
        [(quiet["address"]["id"], True)] * 3 + [(watched["address"]["id"], False)] * 3
    )

    transport = Recording()
    dispatcher, calls = process(dynamodb_local.endpoint, streamed_table, transport)
    quiet_notices = [notice for notice in notices if notice.address_id == quiet["address"]["id"]]
    assert dispatcher.dispatcher.dispatch(quiet_notices) == []
    assert calls == Counter()

    assert dispatcher.dispatcher.dispatch([n for n in notices if n.address_id in by_address]) == []
    assert calls["Query"] >= 1  # the watched address's subscriptions, and its events for the sender
    assert transport.sequences == [1, 2, 3]


def test_a_deleted_subscription_makes_the_address_quiet_again(dynamodb_local, streamed_table: str) -> None:
    services, _ = process(dynamodb_local.endpoint, streamed_table)
    api = LambdaClient(services)
    created = api.provision()
    token = created["credentials"]["read_token"]
    subscriptions = [subscribe(api, created) for _ in range(2)]
    api.post_inbox(created, {"type": "job.started"})
    for subscription in subscriptions:
        path = f"/api/v1/addresses/{created['address']['id']}/subscriptions/{subscription['id']}"
        assert api.request("DELETE", path, token=token).status in (200, 204)
    # A new process: it guesses the head counts none and learns otherwise only from a failed condition.
    later, _ = process(dynamodb_local.endpoint, streamed_table)
    LambdaClient(later).post_inbox(created, {"type": "job.done"})

    flags = [
        (notice.sequence, notice.unsubscribed) for notice in stream_notices(dynamodb_local.endpoint, streamed_table)
    ]
    assert flags == [(1, False), (2, True)]


def test_a_head_from_before_the_count_is_never_taken_for_quiet(dynamodb_local, streamed_table: str) -> None:
    services, _ = process(dynamodb_local.endpoint, streamed_table)
    api = LambdaClient(services)
    created = api.provision()
    head_key = key(keys.address_pk(created["address"]["id"]), keys.META)
    client = make_client(services.settings)
    client.update_item(
        TableName=streamed_table,
        Key=head_key,
        UpdateExpression="REMOVE #s",
        ExpressionAttributeNames={"#s": SUBSCRIBERS},
    )
    fresh, _ = process(dynamodb_local.endpoint, streamed_table)
    LambdaClient(fresh).post_inbox(created, {"type": "job.started"})
    subscription = subscribe(api, created)
    path = f"/api/v1/addresses/{created['address']['id']}/subscriptions/{subscription['id']}"
    assert api.request("DELETE", path, token=created["credentials"]["read_token"]).status in (200, 204)
    LambdaClient(fresh).post_inbox(created, {"type": "job.done"})

    head = client.get_item(TableName=streamed_table, Key=head_key, ConsistentRead=True)["Item"]
    assert int(head[SUBSCRIBERS]["N"]) == UNCOUNTED_SUBSCRIBERS
    flags = [notice.unsubscribed for notice in stream_notices(dynamodb_local.endpoint, streamed_table)]
    assert flags == [False, False]


def post_many(endpoint: str, table: str, created: dict[str, Any], count: int) -> int:
    services, _ = process(endpoint, table)
    api = LambdaClient(services)
    replies = [api.post_inbox(created, {"type": "job.done", "data": {"n": n}}) for n in range(count)]
    return sum(reply.status == 202 for reply in replies)


def test_no_event_owed_to_a_racing_subscription_is_marked_quiet(dynamodb_local, streamed_table: str) -> None:
    """Four processes post while a fifth subscribes: every event after the subscription's cursor reaches
    its target, none is marked as owed to nobody, and none is lost."""
    endpoint = dynamodb_local.endpoint
    transport = Recording()
    services, _ = process(endpoint, streamed_table, transport)
    api = LambdaClient(services)
    created = api.provision()
    writers, each = 4, 40
    head_key = key(keys.address_pk(created["address"]["id"]), keys.META)
    client = make_client(services.settings)

    def last_sequence() -> int:
        head = client.get_item(TableName=streamed_table, Key=head_key, ConsistentRead=True)["Item"]
        return int(head[address_items.LAST_SEQUENCE]["N"])

    context = process_context()
    with context.Pool(writers) as pool:
        posting = pool.starmap_async(post_many, [(endpoint, streamed_table, created, each)] * writers)
        while last_sequence() < writers * each // 4 and not posting.ready():
            pass  # subscribe while the writers are under way, so the race is run, not skipped
        subscription = subscribe(api, created)
        posted = sum(posting.get(timeout=300))

    notices = stream_notices(endpoint, streamed_table)
    assert posted == writers * each == len(notices)
    cursor = subscription["delivered_through"]
    assert 0 < cursor < posted, "the subscription was not created while the writers were posting"
    assert all(not notice.unsubscribed for notice in notices if notice.sequence > cursor)
    assert services.dispatcher.dispatch(notices) == []
    services.sweep.run()
    assert transport.sequences == list(range(cursor + 1, posted + 1))
    head = client.get_item(TableName=streamed_table, Key=head_key, ConsistentRead=True)["Item"]
    assert int(head[SUBSCRIBERS]["N"]) == 1
