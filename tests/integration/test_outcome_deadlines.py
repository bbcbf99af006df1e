"""A send's reserved outcome slot is never held forever, on DynamoDB Local.

Each send reserves a feed slot for its outcome and, in the same commit, a
deadline. A carrier that never reports (SES dropping a notification, a
process dying after the commit) would otherwise hold the slot for good:
once the deadline passes, the outcome sweep records `email.outcome_unknown`
in it, once per send, whoever else records or sweeps.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.email.outbound_ports import ComposedMessage, Handoff
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services, path_of
from tests.support.mail import verified_address

PERSON = "ada@example.org"
DEADLINE = 3_600
OUTCOME_TYPES = {"email.delivered", "email.bounced", "email.complained", "email.failed", "email.outcome_unknown"}


class Carrier:
    """Takes every message; `reports` False leaves the outcome to a later event that, here, never comes."""

    def __init__(self, *, reports: bool) -> None:
        self.sent: list[ComposedMessage] = []
        self._reports = reports
        self._lock = threading.Lock()

    def send(self, message: ComposedMessage) -> Handoff:
        with self._lock:
            self.sent.append(message)
        return Handoff(provider_message_id="p", outcome="delivered" if self._reports else None)


@pytest.fixture
def make_api(dynamodb_local, local_table: str, clock: FakeClock):
    """A process of its own (services, client, hints) on the shared table, per call."""

    def make(carrier: Carrier, **overrides) -> LambdaClient:
        settings = {"outbound_outcome_deadline_seconds": DEADLINE, "owner_reserved_events": 0, **overrides}
        services = make_services(
            table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock, mailer=carrier, **settings
        )
        return LambdaClient(services)

    return make


def verified(api: LambdaClient, carrier: Carrier) -> dict:
    return verified_address(api, PERSON, carrier.sent)


def send(api: LambdaClient, created: dict, key: str) -> dict:
    root = path_of(created["endpoints"]["address_url"])
    message = {"to": PERSON, "subject": f"Approve {key}?", "text": "Yes or no."}
    reply = api.request(
        "POST",
        f"{root}/email/send",
        json_body=message,
        headers={"Idempotency-Key": key},
        token=created["credentials"]["read_token"],
    )
    assert reply.status == 202, reply.text
    return reply.json()


def feed(api: LambdaClient, created: dict) -> list[dict]:
    return api.poll(created, limit=1000).json()["events"]


def outcomes_by_send(events: list[dict]) -> dict[str, list[str]]:
    """Each `email.sent` event's id → the types of the outcome events that name it."""
    found: dict[str, list[str]] = {event["id"]: [] for event in events if event["type"] == "email.sent"}
    for event in events:
        if event["type"] in OUTCOME_TYPES:
            found[event["data"]["send_event_id"]].append(event["type"])
    return found


def test_a_send_never_reported_on_gets_outcome_unknown_at_its_deadline_and_its_slot_back(
    make_api, clock: FakeClock
) -> None:
    carrier = Carrier(reports=False)
    api = make_api(carrier, max_events=8)
    created = verified(api, carrier)
    sends = [send(api, created, f"s{n}") for n in range(3)]
    # Three events and three reserved slots: two of the eight are left.
    assert [api.post_inbox(created, {"n": n}).status for n in range(3)] == [202, 202, 409]

    clock.advance(DEADLINE - 1)
    assert api.services.outcome_sweep.run() == 0
    assert len(feed(api, created)) == 5

    clock.advance(2)
    assert api.services.outcome_sweep.run() == 3
    events = feed(api, created)
    assert outcomes_by_send(events) == {sent["event"]["id"]: ["email.outcome_unknown"] for sent in sends}
    unknown = [event for event in events if event["type"] == "email.outcome_unknown"]
    assert {event["data"]["message_id"] for event in unknown} == {sent["message_id"] for sent in sends}
    assert {event["ingress_surface"] for event in unknown} == {"outbound"}
    assert api.services.outcome_sweep.run() == 0

    # No slot is held any more: emptied, the feed takes all eight of its events again.
    last = events[-1]["sequence"]
    trimmed = api.request(
        "DELETE",
        f"{path_of(created['endpoints']['events_url'])}?through={last}&include_unacknowledged=true",
        token=created["credentials"]["read_token"],
    )
    assert trimmed.status == 200, trimmed.text
    assert [api.post_inbox(created, {"after": n}).status for n in range(9)] == [202] * 8 + [409]


def test_a_send_whose_outcome_came_gets_no_second_one(make_api, clock: FakeClock) -> None:
    reported, silent = Carrier(reports=True), Carrier(reports=False)
    api = make_api(reported)
    created = verified(api, reported)
    delivered = send(api, created, "reported")
    # Another process, whose carrier reports later, through SES's events: one comes, one never does.
    later = make_api(silent)
    bounced, lost = send(later, created, "bounced"), send(later, created, "lost")
    later.services.sending.record_outcome(
        created["address"]["id"], bounced["event"]["id"], "bounced", message_id=bounced["message_id"]
    )

    clock.advance(DEADLINE + 1)
    assert api.services.outcome_sweep.run() == 3  # every deadline settled, two of them by the claim alone
    assert outcomes_by_send(feed(api, created)) == {
        delivered["event"]["id"]: ["email.delivered"],
        bounced["event"]["id"]: ["email.bounced"],
        lost["event"]["id"]: ["email.outcome_unknown"],
    }
    # A report after the sweep is the duplicate.
    late = later.services.sending.record_outcome(
        created["address"]["id"], lost["event"]["id"], "delivered", message_id=lost["message_id"]
    )
    assert late is not None and late.duplicate
    assert len(feed(api, created)) == 6


def test_sweeps_run_twice_and_at_once_write_each_outcome_once(make_api, clock: FakeClock) -> None:
    carrier = Carrier(reports=False)
    api = make_api(carrier)
    created = verified(api, carrier)
    sends = [send(api, created, f"s{n}") for n in range(5)]
    clock.advance(DEADLINE + 1)
    # Two processes sweep the same deadlines at the same time, then one sweeps again.
    sweepers = [make_api(carrier).services.outcome_sweep for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        settled = list(pool.map(lambda sweep: sweep.run(), sweepers))
    assert 5 <= sum(settled) <= 10
    assert sweepers[0].run() == 0
    events = feed(api, created)
    assert outcomes_by_send(events) == {sent["event"]["id"]: ["email.outcome_unknown"] for sent in sends}
    assert [event["sequence"] for event in events] == list(range(1, 11))


def test_the_deadline_is_never_later_than_the_event_retention(make_api, clock: FakeClock) -> None:
    carrier = Carrier(reports=False)
    api = make_api(carrier, event_retention_seconds=600)
    created = verified(api, carrier)
    sent = send(api, created, "short-lived")
    clock.advance(599)
    assert api.services.outcome_sweep.run() == 0
    clock.advance(2)
    assert api.services.outcome_sweep.run() == 1
    [unknown] = feed(api, created)  # the send's own event has expired by now
    assert (unknown["type"], unknown["data"]["send_event_id"]) == ("email.outcome_unknown", sent["event"]["id"])


def test_a_deadline_of_a_deleted_address_is_dropped(make_api, clock: FakeClock) -> None:
    carrier = Carrier(reports=False)
    api = make_api(carrier)
    created = verified(api, carrier)
    send(api, created, "gone")
    deleted = api.request(
        "DELETE", path_of(created["endpoints"]["address_url"]), token=created["credentials"]["read_token"]
    )
    assert deleted.status in (200, 204), deleted.text
    clock.advance(DEADLINE + 1)
    assert api.services.outcome_sweep.run() == 1
    assert api.services.outcome_sweep.run() == 0
