"""Outbound mail on DynamoDB Local: racing requests never pass a limit, and reserved slots hold across processes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.email.outbound_ports import ComposedMessage, Handoff
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services, path_of

PERSON = "ada@example.org"
MESSAGE = {"to": PERSON, "subject": "Approve?", "text": "Yes or no."}


class Carrier:
    """Thread-safe mailer; `delivered` False reports outcomes later, as SES does."""

    def __init__(self, *, delivered: bool) -> None:
        self.sent: list[ComposedMessage] = []
        self._delivered = delivered
        self._lock = threading.Lock()

    def send(self, message: ComposedMessage) -> Handoff:
        with self._lock:
            self.sent.append(message)
        return Handoff(provider_message_id="p", outcome="delivered" if self._delivered else None)


@pytest.fixture
def make_api(dynamodb_local, local_table: str, clock: FakeClock):
    """A process of its own (services, client, hints) on the shared table, per call."""

    def make(carrier: Carrier, **overrides) -> LambdaClient:
        services = make_services(
            table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock, mailer=carrier, **overrides
        )
        return LambdaClient(services)

    return make


def verified(api: LambdaClient, carrier: Carrier) -> dict:
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token)
    code = carrier.sent[-1].raw.split(b"code is: ")[1][:6].decode()
    body = {"email": PERSON, "code": code}
    assert api.request("POST", f"{root}/email/contacts", json_body=body, token=token).status == 200
    return created


def send(api: LambdaClient, created: dict, key: str):
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    return api.request("POST", f"{root}/email/send", json_body=MESSAGE, headers={"Idempotency-Key": key}, token=token)


def test_racing_additions_never_pass_ten_contacts(make_api):
    carrier = Carrier(delivered=True)
    api = make_api(carrier)
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]

    def add(index: int):
        return api.request("POST", f"{root}/email/contacts", json_body={"email": f"p{index}@example.org"}, token=token)

    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(add, range(20)))
    assert sorted(reply.status for reply in replies) == [202] * 10 + [409] * 10
    assert {reply.error_code for reply in replies if reply.status == 409} == {"contact_limit_reached"}
    listed = api.request("GET", f"{root}/email/contacts", token=token).json()["contacts"]
    assert len(listed) == 10 and len(carrier.sent) == 10


def test_racing_sends_never_pass_the_daily_allowance(make_api):
    carrier = Carrier(delivered=True)
    api = make_api(carrier, outbound_max_sends_per_day=5)
    created = verified(api, carrier)
    with ThreadPoolExecutor(max_workers=12) as pool:
        replies = list(pool.map(lambda n: send(api, created, f"k{n}"), range(12)))
    assert sorted(reply.status for reply in replies) == [202] * 5 + [429] * 7
    assert len(carrier.sent) == 1 + 5  # the code, then five messages
    types = [event["type"] for event in api.poll(created, limit=100).json()["events"]]
    assert sorted(types) == ["email.delivered"] * 5 + ["email.sent"] * 5


def test_reserved_outcome_slots_hold_against_another_process_and_racing_posts(make_api):
    carrier = Carrier(delivered=False)
    # No owner reserve: the count below is about outcome slots alone.
    sender = make_api(carrier, max_events=10, owner_reserved_events=0)
    created = verified(sender, carrier)
    with ThreadPoolExecutor(max_workers=8) as pool:
        sends = pool.map(lambda n: send(sender, created, f"s{n}"), range(4))
        # Another process, which has never seen the address, posts at the same time.
        poster = make_api(Carrier(delivered=False), max_events=10, owner_reserved_events=0)
        posts = pool.map(lambda n: poster.post_inbox(created, {"n": n}), range(10))
        sent, posted = list(sends), list(posts)
    accepted_sends = sum(reply.status == 202 for reply in sent)
    accepted_posts = sum(reply.status == 202 for reply in posted)
    refused = [reply.error_code for reply in [*sent, *posted] if reply.status != 202]
    assert set(refused) <= {"quota_exceeded"}
    # Each accepted send holds two slots (its event and its outcome's), each post one.
    assert 2 * accepted_sends + accepted_posts == 10
    events = poster.poll(created, limit=100).json()["events"]
    assert len(events) == accepted_sends + accepted_posts
    # Every promised outcome still fits, whichever process records it.
    address_id = created["address"]["id"]
    for event in events:
        if event["type"] == "email.sent":
            assert poster.services.sending.record_outcome(address_id, event["id"], "delivered", message_id=None)
    assert len(poster.poll(created, limit=100).json()["events"]) == 10
    assert poster.post_inbox(created, {"late": True}).error_code == "quota_exceeded"
