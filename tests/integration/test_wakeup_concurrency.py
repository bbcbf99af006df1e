"""Wake-ups on DynamoDB Local: senders racing on one subscription, the stream follower, limits under races."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cairn.dynamodb.client import make_client, make_streams_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.local.wakeups import StreamFollower
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.models import Delivery, EventNotice, Outcome, Subscription
from tests.support.fakes import FakeClock
from tests.support.lambda_client import DURABLE_EXECUTIONS, LambdaClient


class Recording:
    """A target that takes a little time and records what it was sent, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sequences: list[int] = []
        self.inside = 0
        self.overlapped = False

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        with self.lock:
            self.inside += 1
            self.overlapped |= self.inside > 1
        time.sleep(0.002)
        with self.lock:
            self.inside -= 1
            if delivery.sequence is not None:
                self.sequences.append(delivery.sequence)
        return Outcome(delivered=True, status_code=200)


def build(dynamodb_local: DynamoDBLocal, table: str, clock: Any, transport: Recording, **overrides: Any):
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute=100_000,
        create_rate_per_minute=100_000,
        webhook_allow_local=True,
        **overrides,
    )
    services = Services.build(settings, waiter=NotifyingWaiter(), clock=clock, wake_transport=transport)
    return services, LambdaClient(services)


def subscribe(api: LambdaClient, created: dict, url: str = "http://127.0.0.1:9/hook"):
    return api.request(
        "POST",
        f"/api/v1/addresses/{created['address']['id']}/subscriptions",
        json_body={"target": {"kind": "webhook", "url": url}},
        token=created["credentials"]["read_token"],
    )


def test_racing_senders_deliver_each_event_once_in_order(dynamodb_local, local_table, clock: FakeClock):
    transport = Recording()
    services, api = build(dynamodb_local, local_table, clock, transport)
    created = api.provision()
    assert subscribe(api, created).status == 201
    address_id = created["address"]["id"]
    posted = 60

    def post_and_dispatch(n: int) -> None:
        sequence = api.post_inbox(created, {"type": "job.done", "data": {"n": n}}).json()["event"]["sequence"]
        services.dispatcher.dispatch([EventNotice(address_id, sequence, "job.done", str(sequence))])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post_and_dispatch, range(posted)))
    services.sweep.run()
    assert transport.sequences == list(range(1, posted + 1))
    assert not transport.overlapped, "two senders delivered to one subscription at once"


def test_the_subscription_limit_holds_under_concurrent_creates(dynamodb_local, local_table, clock: FakeClock):
    _, api = build(dynamodb_local, local_table, clock, Recording(), max_subscriptions_per_address=5)
    created = api.provision()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: subscribe(api, created).status, range(16)))
    assert sorted(statuses) == [201] * 5 + [409] * 11
    listed = api.request(
        "GET", f"/api/v1/addresses/{created['address']['id']}/subscriptions", token=created["credentials"]["read_token"]
    )
    assert len(listed.json()["subscriptions"]) == 5


def test_one_callback_subscribed_by_many_requests_at_once_is_one_subscription(
    dynamodb_local, local_table, clock: FakeClock
):
    """A durable step run again while its first run is still subscribing: two subscriptions would
    complete the callback once and fail once."""
    _, api = build(dynamodb_local, local_table, clock, Recording(), wake_target_arns=(DURABLE_EXECUTIONS,))
    created = api.provision()
    base = f"/api/v1/addresses/{created['address']['id']}/subscriptions"
    target = {"kind": "lambda_durable_callback", "callback_id": "Y2FsbGJhY2stMDAx"}
    together = threading.Barrier(8)

    def subscribe_callback(_: int) -> tuple[int, str]:
        together.wait()
        reply = api.request("POST", base, json_body={"target": target}, token=created["credentials"]["read_token"])
        return reply.status, reply.json()["subscription"]["id"]

    for _ in range(3):
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(subscribe_callback, range(8)))
        listed = api.request("GET", base, token=created["credentials"]["read_token"]).json()["subscriptions"]
        assert [item["id"] for item in listed] == [answers[0][1]], "one subscription, named in every answer"
        assert {sub_id for _, sub_id in answers} == {answers[0][1]}
        assert sorted(status for status, _ in answers) == [200] * 7 + [201], "one was created, the rest found it"
        # Gone, it may be subscribed again: the next round starts from none.
        deleted = api.request("DELETE", f"{base}/{answers[0][1]}", token=created["credentials"]["read_token"])
        assert deleted.status == 200


def test_the_stream_follower_hands_new_events_to_the_dispatcher(dynamodb_local, streamed_table, clock: FakeClock):
    transport = Recording()
    services, api = build(dynamodb_local, streamed_table, clock, transport)
    client = make_client(services.settings)
    stream_arn = client.describe_table(TableName=streamed_table)["Table"]["LatestStreamArn"]
    follower = StreamFollower(make_streams_client(services.settings), stream_arn, services.dispatcher)
    stop = threading.Event()
    reader = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    reader.start()
    try:
        created = api.provision()
        subscribe(api, created)
        for n in range(5):
            api.post_inbox(created, {"type": "job.done", "data": {"n": n}})
        deadline = time.monotonic() + 20
        while len(transport.sequences) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        reader.join()
    assert transport.sequences == [1, 2, 3, 4, 5]


def test_a_table_made_before_wake_ups_gets_its_stream(dynamodb_local: DynamoDBLocal):
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    name = f"cairn-old-{time.time_ns()}"
    client.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ensure_table(client, name)
    described = client.describe_table(TableName=name)["Table"]
    assert described["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}


def test_an_event_taken_while_a_subscription_commits_moves_its_cursor_past_it(
    dynamodb_local, local_table, clock: FakeClock
):
    # The race, made certain: an event commits between reading the cursor and storing the subscription.
    services, api = build(dynamodb_local, local_table, clock, Recording())
    created = api.provision()
    api.post_inbox(created, {"type": "job.started"})
    store = services.subscriptions._store
    tries: list[int] = []
    real_create = store.create

    def create_after_an_event_slips_in(subscription: Subscription, **limits: Any) -> None:
        tries.append(subscription.cursor)
        if len(tries) == 1:
            api.post_inbox(created, {"type": "job.done"})
        real_create(subscription, **limits)

    store.create = create_after_an_event_slips_in  # type: ignore[method-assign]
    answer = subscribe(api, created)

    assert answer.status == 201
    assert tries == [1, 2]  # the first cursor predated the second event: refused, read again
    [subscription] = services.subscriptions.list(created["address"]["id"], created["credentials"]["read_token"])
    assert subscription.cursor == 2  # it is owed the events after its creation, none before


def test_a_subscription_for_a_deleted_address_is_refused_not_retried(dynamodb_local, local_table, clock: FakeClock):
    services, api = build(dynamodb_local, local_table, clock, Recording())
    created = api.provision()
    store = services.subscriptions._store
    real_create = store.create
    tries = 0

    def create_after_the_address_is_deleted(subscription: Subscription, **limits: Any) -> None:
        nonlocal tries
        tries += 1
        api.request("DELETE", f"/api/v1/addresses/{created['address']['id']}",
                    token=created["credentials"]["read_token"])  # fmt: skip
        real_create(subscription, **limits)

    store.create = create_after_the_address_is_deleted  # type: ignore[method-assign]
    answer = subscribe(api, created)

    assert answer.status == 401 and tries == 1
