"""Each Lambda function's paths need no DynamoDB action beyond its grant (`infra.storage`), on DynamoDB Local.

Every function is a process of its own in AWS, with a role of its own: here
each gets services with their own client, whose calls are recorded as the
IAM actions that authorize them (a transaction's parts as their item
actions), while the API, unrecorded, sets the scene.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from cairn.addresses.models import OUTBOUND_SURFACE, NewEvent
from cairn.addresses.ports import AppendRequest, OutcomeDeadline
from cairn.addresses.quota import Writer
from cairn.dynamodb.client import make_client
from cairn.dynamodb.raw_messages import raw_message_store
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.email.ingest import Delivery
from cairn.mcp import tools
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.models import Delivery as WakeDelivery
from cairn.wakeups.models import EventNotice, Outcome, Subscription
from infra.storage import DELETES_ONLY_IN, FUNCTION_ACTIONS
from tests.integration.test_contact_codes import Mailbox
from tests.support.fakes import FakeClock
from tests.support.lambda_client import SERVER_SECRET, LambdaClient, path_of
from tests.unit.test_mcp_api import call, credentials

# What authorizes each part of a transaction.
_TRANSACTION_PARTS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


class Recorded:
    """The IAM actions one function's calls needed, and the partitions it deleted in."""

    def __init__(self) -> None:
        self.actions: set[str] = set()
        self.deleted_in: set[str] = set()

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            for part in params["TransactItems"]:
                ((kind, action),) = part.items()
                self._note(_TRANSACTION_PARTS[kind], action.get("Key") or action.get("Item"))
        elif model.name == "TransactGetItems":
            self.actions.add("dynamodb:GetItem")
        else:
            self._note(model.name, params.get("Key"))

    def _note(self, action: str, key: dict[str, Any] | None) -> None:
        self.actions.add(f"dynamodb:{action}")
        if action == "DeleteItem" and key is not None:
            self.deleted_in.add(key["pk"]["S"])

    def assert_within(self, function: str) -> None:
        assert self.actions, f"the {function} function's paths made no DynamoDB call"
        assert self.actions <= set(FUNCTION_ACTIONS[function]), (function, self.actions)
        if function in DELETES_ONLY_IN:
            assert self.deleted_in <= {DELETES_ONLY_IN[function]}, (function, self.deleted_in)


class FailingTarget:
    """Every delivery fails, so retries are scheduled, swept and finally given up."""

    def send(self, subscription: Subscription, delivery: WakeDelivery, now: float) -> Outcome:
        return Outcome(delivered=False, status_code=500, error="down")


@pytest.fixture
def settings(dynamodb_local, local_table: str, tmp_path: Path) -> Settings:
    return Settings(
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        server_secret=SERVER_SECRET,
        email_blob_dir=tmp_path / "mail",
        webhook_allow_local=True,
        poll_rate_per_minute=10_000,
        create_rate_per_minute=10_000,
        stream_heartbeat_seconds=1,
        wake_retry_base_seconds=1,
        wake_retry_window_seconds=2,
    )


@pytest.fixture
def function(settings: Settings, clock: FakeClock) -> Callable[..., tuple[Services, Recorded]]:
    """Services as one function's process has them (with `mailer`, one that sends), with its calls recorded."""

    def new(mailer: Mailbox | None = None) -> tuple[Services, Recorded]:
        client = make_client(settings)
        recorded = Recorded()
        client.meta.events.register("provide-client-params.dynamodb", recorded)
        services = Services.build(
            settings,
            client=client,
            waiter=NotifyingWaiter(),
            clock=clock,
            mailer=mailer,
            wake_transport=FailingTarget(),
        )
        return services, recorded

    return new


@pytest.fixture
def api(settings: Settings, clock: FakeClock) -> LambdaClient:
    return LambdaClient(Services.build(settings, waiter=NotifyingWaiter(), clock=clock, wake_transport=FailingTarget()))


def mail(created: dict[str, Any], settings: Settings, message_id: str) -> Delivery:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "scanner@example.com", created["address"]["email"], "Scan"
    message.set_content("The scan is attached.")
    message.add_attachment(b"PK\x03\x04 scan", maintype="application", subtype="zip", filename="scan.zip")
    raw_message_store(settings).save(message_id, message.as_bytes())
    return Delivery(message_id=message_id, recipients=[created["address"]["email"], "stranger@example.com"])


def test_ingest_and_the_streamed_reads_stay_within_their_grants(api, function, settings: Settings) -> None:
    created, gone = api.provision(), api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    api.request("DELETE", path_of(gone["endpoints"]["address_url"]), token=gone["credentials"]["read_token"])

    ingest, ingested = function()
    ingest.email.ingest(mail(created, settings, "m" * 40))
    ingest.email.ingest(mail(created, settings, "m" * 40))  # a redelivery: the claim answers
    ingest.email.ingest(mail(gone, settings, "g" * 40))  # for a deleted address: refused, discarded
    ingested.assert_within("email-ingest")

    streaming, streamed = function()
    reader = LambdaClient(streaming)
    page = reader.poll(created).json()
    assert reader.poll(created, after=page["events"][-1]["sequence"], wait=1).status == 200
    stream = streaming.feed.watch(address_id, token, after=0, limit=10)
    assert next(stream) and next(stream) == []  # the page, then a heartbeat
    event_id = page["events"][0]["id"]
    download = reader.request(
        "GET", f"{path_of(created['endpoints']['events_url'])}/{event_id}/attachments/att_1", token=token
    )
    assert download.status == 200 and download.content == b"PK\x03\x04 scan"
    assert reader.request("GET", path_of(created["endpoints"]["events_url"]), token="crt_wrong").status == 401
    streamed.assert_within("streaming")


def test_every_mcp_tool_stays_within_the_streaming_grant(function) -> None:
    """`/mcp` runs in the streaming function (its `poll_events` may wait): each of its tools, with what it writes."""
    mailbox = Mailbox()
    streaming, streamed = function(mailer=mailbox)
    mcp = LambdaClient(streaming)
    used: set[str] = set()

    def run(tool: str, **arguments: Any) -> dict[str, Any]:
        used.add(tool)
        result = call(mcp, tool, **arguments)
        assert result["isError"] is False, result
        return result["structuredContent"]

    creds = credentials({"structuredContent": run("create_return_address", expires_in_seconds=3600)})
    run("set_state", **creds, key="plan", value={"step": 1}, if_revision=0)
    run("get_state", **creds, key="plan")
    run("list_state", **creds)
    run("delete_state", **creds, key="plan", if_revision=1)
    [*_, last] = run("poll_events", **creds, after=0)["events"]
    run("acknowledge_event", **creds, event_id=last["id"])
    assert run("poll_events", **creds, after=last["sequence"], wait=0.2)["events"] == []
    run("add_contact", **creds, email="ada@example.org")
    run("verify_contact", **creds, email="ada@example.org", code=mailbox.code_for("ada@example.org"))
    run("list_contacts", **creds)
    run("send_email", **creds, to="ada@example.org", subject="Done", text="The job is done.", idempotency_key="k1")
    target = {"kind": "webhook", "url": "http://127.0.0.1/down"}
    subscription = run("create_subscription", **creds, target=target)["subscription"]["id"]
    run("list_subscriptions", **creds)
    run("delete_subscription", **creds, subscription_id=subscription)
    run("write_file", **creds, key="notes/plan.md", text="# Plan")
    run("write_file", **creds, key="notes/plan.md", data_base64="IyBQbGFuIHYy")  # a replacement
    run("read_file", **creds, key="notes/plan.md")
    run("list_files", **creds, prefix="notes/")
    run("delete_file", **creds, key="notes/plan.md")
    assert used == {tool.name for tool in tools.CAIRN.tools}, "a tool of /mcp this test does not run"
    streamed.assert_within("streaming")


def test_wake_ups_and_outcomes_stay_within_their_grants(api, function, clock: FakeClock) -> None:
    created, gone = api.provision(), api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    subscribed = api.request(
        "POST",
        f"/api/v1/addresses/{address_id}/subscriptions",
        token=token,
        json_body={"target": {"kind": "webhook", "url": "http://127.0.0.1/down"}},
    )
    assert subscribed.status == 201, subscribed.text
    sequence = api.post_inbox(created, {"type": "job.done"}).json()["event"]["sequence"]

    dispatcher, dispatched = function()
    assert dispatcher.dispatcher.dispatch([EventNotice(address_id, sequence, "job.done", "1")]) == []
    dispatched.assert_within("wake-dispatcher")

    sweep, swept = function()
    handed = 0
    for _ in range(3):  # retries until the window closes, then the subscription fails and says so
        clock.advance(5)
        handed += sweep.sweep.run()
    assert handed >= 1
    assert "subscription.failed" in json.dumps(api.poll(created).json()["events"])
    swept.assert_within("wake-sweep")
    assert swept.deleted_in

    api.request("DELETE", path_of(gone["endpoints"]["address_url"]), token=gone["credentials"]["read_token"])
    outcomes, recorded = function()
    first = outcomes.sending.record_outcome(address_id, "evt_000000000001_0a1b2c3d", "delivered", message_id="m")
    again = outcomes.sending.record_outcome(address_id, "evt_000000000001_0a1b2c3d", "delivered", message_id="m")
    assert first is not None and again is not None and again.duplicate
    assert outcomes.sending.record_outcome(gone["address"]["id"], "evt_x", "delivered", message_id="m") is None
    recorded.assert_within("outbound-outcomes")


def test_the_outcome_sweep_stays_within_its_grant(api, function, clock: FakeClock) -> None:
    created, gone = api.provision(), api.provision()
    for address in (created, gone):
        # What a send commits: its event, a reserved outcome slot and that slot's deadline.
        api.services.table.append(
            AppendRequest(
                address_id=address["address"]["id"],
                events=[NewEvent("email.sent", "email", "{}", ingress_surface=OUTBOUND_SURFACE)],
                credential=None,
                now=clock(),
                outcome_slots=1,
                outcome_deadline=OutcomeDeadline(at=clock() + 60, message_id="<m@cairn.localhost>"),
                writer=Writer.OWNER,
            )
        )
    api.request("DELETE", path_of(gone["endpoints"]["address_url"]), token=gone["credentials"]["read_token"])
    clock.advance(61)
    swept, recorded = function()
    assert swept.outcome_sweep.run() == 2  # the deleted address's deadline is dropped
    assert [event["type"] for event in api.poll(created).json()["events"]] == ["email.sent", "email.outcome_unknown"]
    recorded.assert_within("outbound-sweep")
    assert recorded.deleted_in == {DELETES_ONLY_IN["outbound-sweep"]}
