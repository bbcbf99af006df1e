"""`lambda_durable_callback` wake-ups: a durable function's callback completed by the first matching event.

moto does not implement Lambda's durable execution callbacks, so Lambda is
the real botocore client with a `Stubber`: every request is built and
checked against botocore's own service model and answered with what Lambda
answers (success, or the error it names); the rest (routes, allow-list,
sender, retries, the table on moto) is the code Lambda runs.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import pytest
from botocore.stub import Stubber

from cairn import aws
from cairn.addresses.models import Event
from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.models import EventNotice, Subscription, Target, TargetKind
from cairn.wakeups.payload import event_delivery
from cairn.wakeups.transports import Transports, send_once
from cairn.wakeups.webhook import WebhookTransport
from tests.support.fakes import FakeClock
from tests.support.lambda_client import DURABLE_EXECUTIONS, LambdaClient, Reply

REGION = "us-east-1"
CALLBACK_ID = "Y2FsbGJhY2stMDAx+/Zm9v=="
OPERATION = "send_durable_execution_callback_success"
# What Lambda takes as a callback's result, and what a durable execution checkpoints.
MAX_RESULT_BYTES = 262_144


class StubbedLambda:
    """The real Lambda client, answered by a `Stubber`; remembers each request's parameters as sent."""

    def __init__(self) -> None:
        self.client = aws.client("lambda", REGION)
        self.stubber = Stubber(self.client)
        self.sent: list[dict[str, Any]] = []
        self.client.meta.events.register("provide-client-params.lambda.*", self._record)
        self.stubber.activate()

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.sent.append(dict(params))

    def completes(self) -> None:
        self.stubber.add_response(OPERATION, {})

    def refuses(self, code: str, status: int, message: str) -> None:
        self.stubber.add_client_error(
            OPERATION, service_error_code=code, service_message=message, http_status_code=status
        )

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(params["Result"]) for params in self.sent]

    def factory(self, service: str) -> Any:
        assert service == "lambda"
        return self.client


class Deployment:
    """Cairn on moto whose wake-ups go out through the real AWS transport to the stubbed Lambda client."""

    def __init__(self, clock: FakeClock, lambda_: StubbedLambda | None, *, allowed: tuple[str, ...]) -> None:
        """`lambda_` None: the transport the stack builds, to whatever Lambda endpoint the environment names."""
        relaxed = {"poll_rate_per_minute": 10_000, "create_rate_per_minute": 10_000}
        settings = Settings(table_name="cairn-test", wake_target_arns=allowed, wake_retry_base_seconds=5, **relaxed)
        ensure_table(make_client(settings), settings.table_name)
        transport = None
        if lambda_ is not None:
            transport = Transports(WebhookTransport(timeout=10, allow_local=False), AwsTargets(lambda_.factory))
        self.services = Services.build(settings, waiter=NotifyingWaiter(), clock=clock, wake_transport=transport)
        self.api = LambdaClient(self.services)
        self.created = self.api.provision()
        self.address_id = self.created["address"]["id"]
        self.token = self.created["credentials"]["read_token"]

    @property
    def base(self) -> str:
        return f"/api/v1/addresses/{self.address_id}/subscriptions"

    def subscribe(self, target: dict[str, Any], **body: Any) -> Reply:
        return self.api.request("POST", self.base, json_body={"target": target, **body}, token=self.token)

    def subscribe_callback(self, callback_id: str = CALLBACK_ID, **body: Any) -> str:
        reply = self.subscribe({"kind": "lambda_durable_callback", "callback_id": callback_id}, **body)
        assert reply.status == 201, reply.text
        return str(reply.json()["subscription"]["id"])

    def post(self, data: Any, type_: str = "job.done") -> int:
        """Post an event and dispatch its stream notice, as the stream would."""
        sequence: int = self.api.post_inbox(self.created, {"type": type_, "data": data}).json()["event"]["sequence"]
        assert not self.services.dispatcher.dispatch([EventNotice(self.address_id, sequence, type_, str(sequence))])
        return sequence

    def shown(self, sub_id: str) -> dict[str, Any]:
        subscription: dict[str, Any] = self.api.request("GET", f"{self.base}/{sub_id}", token=self.token).json()[
            "subscription"
        ]
        return subscription

    def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.api.poll(self.created).json()["events"]
        return events


@pytest.fixture
def lambda_(moto_env: None) -> StubbedLambda:
    return StubbedLambda()


@pytest.fixture
def deployment(moto_env: None, clock: FakeClock, lambda_: StubbedLambda) -> Deployment:
    return Deployment(clock, lambda_, allowed=(DURABLE_EXECUTIONS,))


def test_the_first_matching_event_completes_the_callback_once(deployment: Deployment, lambda_: StubbedLambda):
    lambda_.completes()
    sub_id = deployment.subscribe_callback(types=["email.received"])
    deployment.post({"skipped": True}, type_="job.done")
    sequence = deployment.post({"from": "grace@example.org", "text": "Ship it."}, type_="email.received")
    # One-shot: a later matching event goes nowhere (an unexpected call would fail the Stubber).
    deployment.post({"from": "grace@example.org", "text": "Actually, wait."}, type_="email.received")

    assert [params["CallbackId"] for params in lambda_.sent] == [CALLBACK_ID]
    (result,) = lambda_.results()
    assert (result["address_id"], result["subscription_id"], result["sequence"]) == (
        deployment.address_id,
        sub_id,
        sequence,
    )
    assert result["event"]["data"] == {"from": "grace@example.org", "text": "Ship it."}
    lambda_.stubber.assert_no_pending_responses()
    shown = deployment.shown(sub_id)
    assert shown["status"] == "ended"
    assert [(a["outcome"], a["sequence"]) for a in shown["attempts"]] == [("ended", sequence)]
    # The callback id completes the function's wait: a credential, never shown again.
    assert shown["target"] == {"kind": "lambda_durable_callback"}
    assert CALLBACK_ID not in json.dumps(deployment.api.request("GET", deployment.base, token=deployment.token).json())


@pytest.mark.parametrize(
    ("code", "status"),
    [("CallbackTimeoutException", 400), ("ResourceNotFoundException", 404), ("InvalidParameterValueException", 400)],
)
def test_a_callback_that_no_longer_waits_fails_the_subscription_with_the_reason(
    deployment: Deployment, lambda_: StubbedLambda, code: str, status: int
):
    lambda_.refuses(code, status, "The callback has already been closed.")
    sub_id = deployment.subscribe_callback()
    sequence = deployment.post({"n": 1})
    deployment.post({"n": 2})

    # Failed at once, without retries: the failure can never pass.
    assert len(lambda_.sent) == 1
    shown = deployment.shown(sub_id)
    assert (shown["status"], shown["next_retry_at"]) == ("failed", None)
    (attempt,) = shown["attempts"]
    reason = f"{code}: The callback has already been closed."
    assert (attempt["outcome"], attempt["sequence"], attempt["error"]) == ("failed", sequence, reason)
    failed = [event for event in deployment.events() if event["type"] == "subscription.failed"]
    assert [event["data"] for event in failed] == [
        {
            "subscription_id": sub_id,
            "target_kind": "lambda_durable_callback",
            "undelivered_sequence": sequence,
            "attempts": 1,
            "reason": reason,
        }
    ]


def test_throttling_is_retried_with_back_off_and_then_completes(
    deployment: Deployment, lambda_: StubbedLambda, clock: FakeClock
):
    lambda_.refuses("TooManyRequestsException", 429, "Rate exceeded")
    lambda_.refuses("ServiceException", 500, "Internal error")
    lambda_.completes()
    sub_id = deployment.subscribe_callback()
    sequence = deployment.post({"n": 1})
    shown = deployment.shown(sub_id)
    assert (shown["status"], shown["failures"]) == ("active", 1)
    assert shown["attempts"][0]["error"] == "TooManyRequestsException: Rate exceeded"
    for _ in range(2):
        clock.advance(60)
        deployment.services.sweep.run()
    shown = deployment.shown(sub_id)
    assert shown["status"] == "ended"
    assert [a["outcome"] for a in reversed(shown["attempts"])] == ["failed", "failed", "ended"]
    assert [result["sequence"] for result in lambda_.results()] == [sequence] * 3
    assert not [event for event in deployment.events() if event["type"] == "subscription.failed"]


def test_an_agent_that_waits_on_a_new_callback_every_run_never_runs_out_of_subscriptions(
    deployment: Deployment, lambda_: StubbedLambda
):
    for run in range(15):
        lambda_.completes()
        sub_id = deployment.subscribe_callback(f"cnVuLT{run:02d}")
        deployment.post({"run": run})
        assert deployment.shown(sub_id)["status"] == "ended"
    listing = deployment.api.request("GET", deployment.base, token=deployment.token).json()["subscriptions"]
    assert 1 <= len(listing) <= 10
    assert [result["event"]["data"] for result in lambda_.results()] == [{"run": run} for run in range(15)]


def test_subscribing_one_callback_again_answers_the_first_subscription(deployment: Deployment, lambda_: StubbedLambda):
    """A durable step run again after a crash subscribes again: two would complete it once and fail once."""
    first = deployment.subscribe({"kind": "lambda_durable_callback", "callback_id": CALLBACK_ID})
    again = deployment.subscribe({"kind": "lambda_durable_callback", "callback_id": CALLBACK_ID})
    assert (first.status, again.status) == (201, 200)
    assert again.json()["subscription"]["id"] == first.json()["subscription"]["id"]
    other = deployment.subscribe({"kind": "lambda_durable_callback", "callback_id": "b3RoZXI="})
    assert other.status == 201
    lambda_.completes()
    lambda_.completes()
    deployment.post({"n": 1})
    assert sorted(params["CallbackId"] for params in lambda_.sent) == sorted([CALLBACK_ID, "b3RoZXI="])
    assert not [event for event in deployment.events() if event["type"] == "subscription.failed"]


def test_failed_and_active_subscriptions_keep_their_slots(deployment: Deployment, lambda_: StubbedLambda):
    lambda_.refuses("CallbackTimeoutException", 400, "The callback timed out.")
    failed = deployment.subscribe_callback()
    deployment.post({"n": 1})
    for n in range(9):
        deployment.subscribe_callback(f"d2FpdC{n:02d}", types=["never.sent"])
    refused = deployment.subscribe({"kind": "lambda_durable_callback", "callback_id": "Y2FsbGJhY2stMTEx"})
    assert (refused.status, refused.error_code) == (409, "subscription_limit_exceeded")
    assert deployment.shown(failed)["status"] == "failed"


class LosingLambda(ThreadingHTTPServer):
    """A Lambda endpoint that takes the first callback request and never answers it (it may have completed the
    callback), then answers every later one as Lambda does once the callback is closed."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                owner.paths.append(self.path)
                self.close_connection = True
                if len(owner.paths) == 1:
                    return  # the connection closes with no answer
                body = json.dumps({"Type": "User", "message": "The callback has already been closed."}).encode()
                self.send_response(400)
                self.send_header("x-amzn-ErrorType", "InvalidParameterValueException")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def test_a_callback_whose_answer_was_lost_ends_without_failing_and_never_shows_its_id(
    moto_env: None, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
):
    lost = LosingLambda()
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", lost.url)
    try:
        deployment = Deployment(clock, None, allowed=(DURABLE_EXECUTIONS,))
        sub_id = deployment.subscribe_callback()
        sequence = deployment.post({"n": 1})
        # One request: a retry by the client itself, right after a lost answer, would find the callback closed.
        assert len(lost.paths) == 1
        assert quote(CALLBACK_ID, safe="") in lost.paths[0]
        shown = deployment.shown(sub_id)
        assert (shown["status"], shown["failures"]) == ("active", 1)
        assert shown["attempts"][0]["error"].startswith("ConnectionClosedError")
        clock.advance(60)
        deployment.services.sweep.run()
    finally:
        lost.shutdown()
        lost.server_close()
    assert len(lost.paths) == 2
    shown = deployment.shown(sub_id)
    assert shown["status"] == "ended", shown
    assert [(a["outcome"], a["sequence"]) for a in reversed(shown["attempts"])] == [
        ("failed", sequence),
        ("ended", sequence),
    ]
    assert not [event for event in deployment.events() if event["type"] == "subscription.failed"]
    listing = deployment.api.request("GET", deployment.base, token=deployment.token).text
    for form in (CALLBACK_ID, quote(CALLBACK_ID, safe=""), quote(CALLBACK_ID)):
        assert form not in listing


def test_an_event_over_the_checkpoint_limit_goes_as_a_reference(lambda_: StubbedLambda):
    lambda_.completes()
    target = Subscription(
        "sub_" + "0" * 24,
        "addr_" + "a" * 26,
        Target(TargetKind.LAMBDA_DURABLE_CALLBACK, {"callback_id": CALLBACK_ID}),
        (),
        None,
        0.0,
    )
    big = Event(
        "evt_7_abcd", 7, "email.received", "mail", json.dumps({"text": "x" * MAX_RESULT_BYTES}), 1.0, 2.0, "email"
    )
    delivery = event_delivery(target.address_id, target.id, big)
    assert len(delivery.body.encode()) > MAX_RESULT_BYTES
    assert AwsTargets(lambda_.factory).send(target, delivery).delivered
    (params,) = lambda_.sent
    assert len(params["Result"]) <= MAX_RESULT_BYTES
    result = json.loads(params["Result"])
    # Enough to read the event from the feed: the address, the sequence and the event id.
    assert (result["address_id"], result["sequence"], result["event"]["id"]) == (target.address_id, 7, "evt_7_abcd")
    assert result["event"]["data_omitted"] is True and "data" not in result["event"]


def test_callbacks_need_durable_executions_on_the_allow_list(moto_env: None, clock: FakeClock, lambda_: StubbedLambda):
    # A function's ARN allows invoking it, not completing its executions' callbacks.
    only_invoke = Deployment(clock, lambda_, allowed=("arn:aws:lambda:us-east-1:123456789012:function:release",))
    refused = only_invoke.subscribe({"kind": "lambda_durable_callback", "callback_id": CALLBACK_ID})
    assert (refused.status, refused.error_code) == (400, "target_refused")
    assert only_invoke.api.request("GET", only_invoke.base, token=only_invoke.token).json()["subscriptions"] == []
    nothing = Deployment(clock, lambda_, allowed=())
    assert nothing.subscribe({"kind": "lambda_durable_callback", "callback_id": CALLBACK_ID}).error_code == (
        "target_refused"
    )
    assert lambda_.sent == []


@pytest.mark.parametrize(
    ("target", "status", "code"),
    [
        ({"kind": "lambda_durable_callback", "callback_id": "not base64!"}, 400, "target_refused"),
        ({"kind": "lambda_durable_callback", "callback_id": ""}, 400, "target_refused"),
        ({"kind": "lambda_durable_callback", "callback_id": "A" * 1025}, 422, "invalid_request"),
        ({"kind": "lambda_durable_callback"}, 422, "invalid_request"),
        ({"kind": "lambda_durable_callback", "callback_id": CALLBACK_ID, "function_arn": "x"}, 422, "invalid_request"),
    ],
)
def test_a_malformed_callback_target_is_a_clear_client_error(
    deployment: Deployment, target: dict[str, Any], status: int, code: str
):
    reply = deployment.subscribe(target)
    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert deployment.api.request("GET", deployment.base, token=deployment.token).json()["subscriptions"] == []


def test_a_test_delivery_would_use_the_callback_up_and_is_refused(deployment: Deployment, lambda_: StubbedLambda):
    sub_id = deployment.subscribe_callback()
    reply = deployment.api.request("POST", f"{deployment.base}/{sub_id}/test", token=deployment.token)
    assert (reply.status, reply.error_code) == (400, "target_refused")
    assert lambda_.sent == []
    assert deployment.shown(sub_id)["status"] == "active"


def test_openapi_offers_the_target_with_its_one_parameter(deployment: Deployment):
    schemas = deployment.api.request("GET", "/openapi.json").json()["components"]["schemas"]
    (target,) = [schema for schema in schemas.values() if "callback_id" in schema.get("properties", {})]
    assert target["properties"]["kind"]["const"] == "lambda_durable_callback"
    assert target["required"] == ["kind", "callback_id"]
    assert target["additionalProperties"] is False


class Raising:
    """A transport with a defect whose error quotes what it was sending to."""

    def send(self, subscription: Subscription, delivery: Any, now: float) -> Any:
        raise RuntimeError(f"could not reach /durable-execution-callbacks/{quote(CALLBACK_ID, safe='')}/succeed")


def test_an_unforeseen_error_shows_no_callback_id_either(caplog: pytest.LogCaptureFixture):
    target = Target(TargetKind.LAMBDA_DURABLE_CALLBACK, {"callback_id": CALLBACK_ID})
    subscription = Subscription(
        id="sub_1", address_id="addr_1", target=target, types=(), description=None, created_at=0
    )
    event = Event(
        id="evt_1",
        sequence=1,
        type="job.done",
        source="x",
        data_json="{}",
        created_at=0.0,
        expires_at=1.0,
        ingress_surface="http",
    )
    delivery = event_delivery("addr_1", "sub_1", event)
    outcome = send_once(Raising(), subscription, delivery, 0.0)
    assert outcome.error is not None and outcome.error.startswith("RuntimeError")
    for text in (outcome.error, caplog.text):
        assert CALLBACK_ID not in text and quote(CALLBACK_ID, safe="") not in text
