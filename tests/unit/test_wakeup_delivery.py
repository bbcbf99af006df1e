"""The delivery engine on moto: order, once, back-off without holding others back, failure, endings."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.subscription_items import subscription_key
from cairn.dynamodb.subscription_table import SubscriptionTable
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.dispatcher import SWEEP_BATCH
from cairn.wakeups.models import Delivery, EventNotice, Outcome, Subscription
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient

BASE_DELAY = 5


class ScriptedTransport:
    """Answers per target URL from a script (then delivered); records what was sent."""

    def __init__(self, script: dict[str, list[Outcome]] | None = None) -> None:
        self.script = script or {}
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        url = subscription.target.params.get("url", subscription.target.kind.value)
        self.sent.append((url, json.loads(delivery.body)))
        answers = self.script.get(url, [])
        return answers.pop(0) if answers else Outcome(delivered=True, status_code=200)

    def sequences(self, url: str) -> list[int]:
        return [body["sequence"] for sent_to, body in self.sent if sent_to == url]


class Engine:
    """An API on moto whose dispatcher and sweep use a scripted transport, driven by hand."""

    def __init__(self, clock: FakeClock, transport: ScriptedTransport, **overrides: Any) -> None:
        relaxed = {"poll_rate_per_minute": 10_000, "create_rate_per_minute": 10_000}
        settings = Settings(table_name="cairn-test", webhook_allow_local=True, **relaxed, **overrides)
        client = make_client(settings)
        ensure_table(client, settings.table_name)
        self.services = Services.build(settings, waiter=NotifyingWaiter(), clock=clock, wake_transport=transport)
        self.api = LambdaClient(self.services)
        self.table = SubscriptionTable(client, settings.table_name)
        self.clock = clock
        self.created = self.api.provision()
        self.address_id = self.created["address"]["id"]
        self.token = self.created["credentials"]["read_token"]

    def subscribe(self, url: str, **body: Any) -> str:
        reply = self.api.request(
            "POST",
            f"/api/v1/addresses/{self.address_id}/subscriptions",
            json_body={"target": {"kind": "webhook", "url": url}, **body},
            token=self.token,
        )
        assert reply.status == 201, reply.text
        return reply.json()["subscription"]["id"]

    def post(self, count: int, type_: str = "job.done") -> None:
        """Post events and dispatch their stream notices, as the stream would."""
        for _ in range(count):
            reply = self.api.post_inbox(self.created, {"type": type_, "data": {}})
            sequence = reply.json()["event"]["sequence"]
            assert not self.services.dispatcher.dispatch([EventNotice(self.address_id, sequence, type_, str(sequence))])

    def shown(self, sub_id: str) -> dict[str, Any]:
        path = f"/api/v1/addresses/{self.address_id}/subscriptions/{sub_id}"
        return self.api.request("GET", path, token=self.token).json()["subscription"]

    def feed_types(self) -> list[str]:
        return [event["type"] for event in self.api.poll(self.created).json()["events"]]


@pytest.fixture
def transport() -> ScriptedTransport:
    return ScriptedTransport()


@pytest.fixture
def engine(moto_env: None, clock: FakeClock, transport: ScriptedTransport) -> Engine:
    return Engine(clock, transport, wake_retry_base_seconds=BASE_DELAY)


def test_each_event_is_delivered_once_in_order(engine: Engine, transport: ScriptedTransport):
    sub_id = engine.subscribe("http://127.0.0.1/a")
    engine.post(5)
    assert transport.sequences("http://127.0.0.1/a") == [1, 2, 3, 4, 5]
    body = transport.sent[0][1]
    assert body["address_id"] == engine.address_id
    assert body["subscription_id"] == sub_id
    assert body["event"]["type"] == "job.done"
    shown = engine.shown(sub_id)
    assert shown["delivered_through"] == 5
    assert [attempt["sequence"] for attempt in shown["attempts"]] == [5, 4, 3, 2, 1]
    assert {attempt["outcome"] for attempt in shown["attempts"]} == {"delivered"}


def test_a_subscription_receives_only_events_after_it_was_made(engine: Engine, transport: ScriptedTransport):
    engine.post(2)
    engine.subscribe("http://127.0.0.1/a")
    engine.post(1)
    assert transport.sequences("http://127.0.0.1/a") == [3]


def test_types_filter_what_is_delivered(engine: Engine, transport: ScriptedTransport):
    sub_id = engine.subscribe("http://127.0.0.1/a", types=["email.received"])
    engine.post(2, "job.done")
    engine.post(1, "email.received")
    assert transport.sequences("http://127.0.0.1/a") == [3]
    assert engine.shown(sub_id)["delivered_through"] == 3


def test_a_failing_target_backs_off_without_holding_others(
    engine: Engine, transport: ScriptedTransport, clock: FakeClock
):
    transport.script["http://127.0.0.1/bad"] = [Outcome(False, status_code=500)] * 3
    bad = engine.subscribe("http://127.0.0.1/bad")
    engine.subscribe("http://127.0.0.1/good")
    engine.post(3)
    assert transport.sequences("http://127.0.0.1/good") == [1, 2, 3]
    assert transport.sequences("http://127.0.0.1/bad") == [1]
    shown = engine.shown(bad)
    assert (shown["failures"], shown["delivered_through"]) == (1, 0)
    assert shown["attempts"][0]["status_code"] == 500
    assert shown["attempts"][0]["next_retry_at"] == shown["next_retry_at"] is not None
    engine.services.sweep.run()  # not due yet
    assert transport.sequences("http://127.0.0.1/bad") == [1]
    for delay in (BASE_DELAY, 2 * BASE_DELAY, 4 * BASE_DELAY):
        clock.advance(delay)
        engine.services.sweep.run()
    assert transport.sequences("http://127.0.0.1/bad") == [1, 1, 1, 1, 2, 3]
    shown = engine.shown(bad)
    assert (shown["status"], shown["failures"], shown["next_retry_at"]) == ("active", 0, None)


def test_back_off_doubles_up_to_the_cap(moto_env: None, clock: FakeClock):
    transport = ScriptedTransport({"http://127.0.0.1/bad": [Outcome(False, error="refused")] * 6})
    engine = Engine(clock, transport, wake_retry_base_seconds=2, wake_retry_max_interval_seconds=10)
    sub_id = engine.subscribe("http://127.0.0.1/bad")
    engine.post(1)
    for _ in range(5):
        clock.advance(10)
        engine.services.sweep.run()
    attempts = engine.shown(sub_id)["attempts"]
    delays = [round(moment(a["next_retry_at"]) - moment(a["at"])) for a in reversed(attempts)]
    assert delays == [2, 4, 8, 10, 10, 10]
    assert {attempt["error"] for attempt in attempts} == {"refused"}


def moment(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_after_the_retry_window_the_subscription_fails_and_an_event_says_so(
    engine: Engine, transport: ScriptedTransport, clock: FakeClock
):
    transport.script["http://127.0.0.1/bad"] = [Outcome(False, status_code=503)] * 1000
    bad = engine.subscribe("http://127.0.0.1/bad")
    engine.subscribe("http://127.0.0.1/good")
    engine.post(1)
    for _ in range(40):
        clock.advance(3_600)
        engine.services.sweep.run()
    shown = engine.shown(bad)
    assert shown["status"] == "failed"
    assert shown["attempts"][0]["outcome"] == "failed"
    assert engine.feed_types() == ["job.done", "subscription.failed"]
    failed_event = engine.api.poll(engine.created).json()["events"][1]
    assert failed_event["data"]["subscription_id"] == bad
    # A webhook's answer carries no error text: its status is the reason.
    assert failed_event["data"]["reason"] == "HTTP 503"
    assert failed_event["ingress_surface"] == "wakeups"
    # The good subscription hears of the failure; the failed one hears nothing more.
    engine.services.dispatcher.dispatch([EventNotice(engine.address_id, 2, "subscription.failed", "2")])
    assert transport.sequences("http://127.0.0.1/good") == [1, 2]
    attempts_before = len([1 for url, _ in transport.sent if url.endswith("/bad")])
    engine.post(1)
    assert len([1 for url, _ in transport.sent if url.endswith("/bad")]) == attempts_before


def test_410_ends_the_subscription(engine: Engine, transport: ScriptedTransport):
    transport.script["http://127.0.0.1/gone"] = [
        Outcome(True, status_code=200),
        Outcome(False, gone=True, status_code=410),
    ]
    sub_id = engine.subscribe("http://127.0.0.1/gone")
    engine.post(3)
    assert transport.sequences("http://127.0.0.1/gone") == [1, 2]
    shown = engine.shown(sub_id)
    assert shown["status"] == "ended"
    assert (shown["attempts"][0]["outcome"], shown["attempts"][0]["status_code"]) == ("ended", 410)


def test_a_step_functions_target_is_used_once(moto_env: None, clock: FakeClock):
    transport = ScriptedTransport()
    engine = Engine(clock, transport, wake_target_arns=("arn:aws:states:*",))
    reply = engine.api.request(
        "POST",
        f"/api/v1/addresses/{engine.address_id}/subscriptions",
        json_body={"target": {"kind": "step_functions", "task_token": "token-1"}},
        token=engine.token,
    )
    sub_id = reply.json()["subscription"]["id"]
    engine.post(2)
    assert transport.sequences("step_functions") == [1]
    assert engine.shown(sub_id)["status"] == "ended"


def test_a_busy_subscription_is_checked_when_the_lease_lapses(engine: Engine, transport: ScriptedTransport):
    sub_id = engine.subscribe("http://127.0.0.1/a")
    held = engine.table.acquire(engine.address_id, sub_id, "crashed-sender", now=engine.clock(), lease_seconds=120)
    assert held is not None
    engine.post(1)
    assert transport.sent == []
    engine.clock.advance(121)
    engine.services.sweep.run()
    assert transport.sequences("http://127.0.0.1/a") == [1]


def test_a_sender_within_the_millisecond_after_a_lapsed_lease_leaves_its_events_to_the_sweep(
    engine: Engine, transport: ScriptedTransport
):
    """The table keeps a lease's end to the millisecond. A sender that comes within the millisecond after
    it is refused the lease, as stored, and must still have the subscription checked again."""
    sub_id = engine.subscribe("http://127.0.0.1/a")
    held = engine.table.acquire(engine.address_id, sub_id, "crashed-sender", now=engine.clock(), lease_seconds=120)
    assert held is not None and held.lease_until is not None
    engine.clock.advance(held.lease_until - engine.clock() + 0.0004)
    engine.post(1)
    assert transport.sent == []
    engine.clock.advance(1)
    engine.services.sweep.run()
    assert transport.sequences("http://127.0.0.1/a") == [1]


def test_a_deleted_subscription_receives_nothing(engine: Engine, transport: ScriptedTransport):
    sub_id = engine.subscribe("http://127.0.0.1/a")
    path = f"/api/v1/addresses/{engine.address_id}/subscriptions/{sub_id}"
    assert engine.api.request("DELETE", path, token=engine.token).status == 200
    engine.post(1)
    assert transport.sent == []


def test_events_noted_then_trimmed_before_delivery_let_the_sender_go(
    engine: Engine, transport: ScriptedTransport, monkeypatch: pytest.MonkeyPatch
):
    """The owner trims events the dispatcher noted but no sender has delivered: nothing is left to list,
    and the sender must give its lease back rather than list and try to let go for ever."""
    releases = []
    release = SubscriptionTable.release

    def counted(self: SubscriptionTable, *args: Any, **kwargs: Any) -> int | None:
        releases.append(kwargs.get("cursor"))
        assert len(releases) < 20, "the sender never lets go"
        return release(self, *args, **kwargs)

    monkeypatch.setattr(SubscriptionTable, "release", counted)
    sub_id = engine.subscribe("http://127.0.0.1/a")
    held = engine.table.acquire(engine.address_id, sub_id, "crashed-sender", now=engine.clock(), lease_seconds=120)
    assert held is not None
    engine.post(2)  # noted (through 2), not delivered: the lease is held
    path = f"/api/v1/addresses/{engine.address_id}/events?through=2&include_unacknowledged=true"
    assert engine.api.request("DELETE", path, token=engine.token).status == 200
    engine.clock.advance(121)
    engine.services.sweep.run()
    assert transport.sent == []
    engine.post(1)
    assert transport.sequences("http://127.0.0.1/a") == [3], "later events are delivered as before"


def test_a_sweep_that_can_hand_over_nothing_leaves_the_batch_to_its_next_run(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
):
    """Storage trouble on every delivery of a full batch: read again at once, the same batch would be
    tried until the deadline (in `cairn serve`, for ever), a Query and a hundred updates a turn."""
    for index in range(SWEEP_BATCH):
        engine.table.schedule(engine.address_id, f"sub_{index:024x}", engine.clock() - 1)

    def throttled(self: SubscriptionTable, *args: Any, **kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "Update")

    monkeypatch.setattr(SubscriptionTable, "acquire", throttled)
    reads = []
    due = SubscriptionTable.due
    monkeypatch.setattr(SubscriptionTable, "due", lambda self, now, limit: reads.append(now) or due(self, now, limit))
    checks = iter(range(1000))
    assert engine.services.sweep.run(until=lambda: next(checks) >= 20) == 0
    assert len(reads) == 1, "the batch waits for the next run"
    assert len(engine.table.due(engine.clock(), SWEEP_BATCH)) == SWEEP_BATCH, "and is still due then"


class Raising(ScriptedTransport):
    """A transport with a defect: it raises for one URL instead of answering with an outcome."""

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        if subscription.target.params.get("url") == "http://127.0.0.1/broken":
            self.sent.append(("http://127.0.0.1/broken", json.loads(delivery.body)))
            raise ValueError("a defect in the transport")
        return super().send(subscription, delivery, now)


def test_an_unexpected_delivery_error_is_a_failed_attempt_that_counts(moto_env: None, clock: FakeClock):
    transport = Raising()
    engine = Engine(clock, transport, wake_retry_base_seconds=BASE_DELAY, wake_retry_window_seconds=60)
    broken = engine.subscribe("http://127.0.0.1/broken")
    engine.subscribe("http://127.0.0.1/good")
    engine.post(1)  # asserts that the batch reports no failure: nothing for the stream to retry forever
    assert transport.sequences("http://127.0.0.1/good") == [1]
    shown = engine.shown(broken)
    assert (shown["status"], shown["failures"], shown["delivered_through"]) == ("active", 1, 0)
    assert shown["attempts"][0]["outcome"] == "failed"
    assert "ValueError" in shown["attempts"][0]["error"]
    assert shown["next_retry_at"] is not None
    tested = engine.api.request(
        "POST", f"/api/v1/addresses/{engine.address_id}/subscriptions/{broken}/test", token=engine.token
    )
    assert tested.status == 200, tested.text
    assert tested.json()["attempt"]["outcome"] == "failed"
    # Retries count, so the window ends them like any other failure.
    for _ in range(10):
        clock.advance(60)
        engine.services.sweep.run()
    assert engine.shown(broken)["status"] == "failed"
    assert engine.feed_types() == ["job.done", "subscription.failed"]


@pytest.mark.parametrize("bad", ["http://127.0.0.1:9/a b", "http://127.0.0.1:9/a\x00b", "http://127.0.0.1:9/\r\nX: 1"])
def test_a_stored_url_that_is_now_refused_fails_its_deliveries_visibly(moto_env: None, clock: FakeClock, bad: str):
    # Subscriptions made before such URLs were refused at creation: real transports, the URL changed in place.
    engine = Engine(clock, None, wake_retry_base_seconds=BASE_DELAY)  # type: ignore[arg-type]
    sub_id = engine.subscribe("http://127.0.0.1:9/placeholder")
    engine.table._client.update_item(
        TableName="cairn-test",
        Key=subscription_key(engine.address_id, sub_id),
        UpdateExpression="SET params = :params",
        ExpressionAttributeValues={":params": {"S": json.dumps({"url": bad})}},
    )
    engine.post(1)
    shown = engine.shown(sub_id)
    assert (shown["status"], shown["failures"], shown["delivered_through"]) == ("active", 1, 0)
    assert shown["attempts"][0]["error"]
    tested = engine.api.request(
        "POST", f"/api/v1/addresses/{engine.address_id}/subscriptions/{sub_id}/test", token=engine.token
    )
    assert (tested.status, tested.json()["attempt"]["outcome"]) == (200, "failed")


@pytest.fixture
def garbled_receiver() -> Iterator[str]:
    """A receiver that answers every request with a status line and one 99 KB header line of control bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    answer = b"HTTP/1.1 200 OK\r\n" + b"\x01" * 99_000 + b"\r\n\r\n"

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                connection.settimeout(5)
                received = b""
                while b"\r\n\r\n" not in received and (chunk := connection.recv(65536)):
                    received += chunk
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    listener.close()


def test_an_answer_that_quotes_itself_into_a_huge_error_is_a_failed_attempt_with_a_short_reason(
    moto_env: None, clock: FakeClock, garbled_receiver: str
):
    """The HTTP client's error quoted the whole header line, 400 KB once escaped: the attempt could not be
    stored, so delivery raised, nothing was backed off, and the test call answered 500."""
    engine = Engine(clock, None, wake_retry_base_seconds=BASE_DELAY)  # type: ignore[arg-type]
    sub_id = engine.subscribe(garbled_receiver)
    engine.post(1)  # asserts that the batch reports no failure
    shown = engine.shown(sub_id)
    assert (shown["status"], shown["failures"], shown["delivered_through"]) == ("active", 1, 0)
    assert shown["attempts"][0]["outcome"] == "failed" and 0 < len(shown["attempts"][0]["error"]) <= 300
    assert shown["next_retry_at"] is not None
    tested = engine.api.request(
        "POST", f"/api/v1/addresses/{engine.address_id}/subscriptions/{sub_id}/test", token=engine.token
    )
    assert (tested.status, tested.json()["attempt"]["outcome"]) == (200, "failed")


def test_nothing_is_delivered_once_the_address_has_expired(
    engine: Engine, transport: ScriptedTransport, clock: FakeClock
):
    """A retry due after the address expired sent its events (their data included) to the target."""
    url = "http://127.0.0.1/late"
    transport.script[url] = [Outcome(False, status_code=500)]
    expiring = engine.api.provision(expires_in_seconds=60)
    address_id, token = expiring["address"]["id"], expiring["credentials"]["read_token"]
    base = f"/api/v1/addresses/{address_id}/subscriptions"
    target = {"kind": "webhook", "url": url}
    sub_id = engine.api.request("POST", base, json_body={"target": target}, token=token).json()["subscription"]["id"]
    for n in range(2):
        sequence = engine.api.post_inbox(expiring, {"type": "job.done", "data": {"n": n}}).json()["event"]["sequence"]
        engine.services.dispatcher.dispatch([EventNotice(address_id, sequence, "job.done", str(sequence))])
    assert transport.sequences(url) == [1]
    clock.advance(120)
    assert engine.api.poll(expiring).status == 401
    engine.services.sweep.run()
    assert transport.sequences(url) == [1], "nothing goes out for an expired address"
    ended = engine.table.get(address_id, sub_id)
    assert ended is not None and ended.status.value == "ended"
    engine.services.sweep.run()
    assert transport.sequences(url) == [1]


def test_an_expiring_address_s_subscription_count_expires_with_it(engine: Engine):
    """Everything else under an expiring address carries its expiry; the count stayed forever."""
    expiring = engine.api.provision(expires_in_seconds=3600)
    address_id, token = expiring["address"]["id"], expiring["credentials"]["read_token"]
    target = {"kind": "webhook", "url": "http://127.0.0.1/a"}
    base = f"/api/v1/addresses/{address_id}/subscriptions"
    assert engine.api.request("POST", base, json_body={"target": target}, token=token).status == 201
    count = make_client(engine.services.settings).get_item(
        TableName="cairn-test", Key={"pk": {"S": f"A#{address_id}"}, "sk": {"S": keys.SUBSCRIPTION_COUNT}}
    )["Item"]
    expires_at = datetime.fromisoformat(expiring["address"]["expires_at"]).timestamp()
    assert (count["n"]["N"], int(count["expires_at"]["N"])) == ("1", int(expires_at))


def test_deliveries_not_started_before_the_deadline_are_left_to_the_sweep(engine: Engine, transport: ScriptedTransport):
    """Owed more runs than fit before Lambda's deadline, a batch was cut off and sent again whole."""
    engine.subscribe("http://127.0.0.1/a")
    reply = engine.api.post_inbox(engine.created, {"type": "job.done", "data": {}})
    sequence = reply.json()["event"]["sequence"]
    notice = EventNotice(engine.address_id, sequence, "job.done", str(sequence))
    assert engine.services.dispatcher.dispatch([notice], until=lambda: True) == [], "handled, not failed"
    assert transport.sent == []
    engine.services.sweep.run()
    assert transport.sequences("http://127.0.0.1/a") == [sequence]
