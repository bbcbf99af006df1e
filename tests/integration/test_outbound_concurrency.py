"""Outbound mail on DynamoDB Local: racing requests never pass a limit, reserved slots hold across processes,
racing retries of a send mail it at most once (through a real SMTP relay), and nothing is written under an
address once its deletion began."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.email.outbound_ports import ComposedMessage, Handoff
from cairn.local.outbound import SmtpRelayMailer
from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services, path_of
from tests.support.mail import verified_address
from tests.support.relay import Relay, running_relay

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
    return verified_address(api, PERSON, carrier.sent)


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


def test_racing_guesses_get_five_tries_at_a_code_and_no_more(make_api):
    carrier = Carrier(delivered=True)
    api = make_api(carrier)
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    assert api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token).status == 202
    code = carrier.sent[-1].raw.split(b"code is: ")[1][:6].decode()
    wrong = "000000" if code != "000000" else "111111"

    def guess(_: int):
        return api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON, "code": wrong}, token=token)

    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(guess, range(20)))
    assert sorted(reply.error_code for reply in replies) == ["too_many_attempts"] * 15 + ["wrong_code"] * 5
    # Each try was told exactly what was left after it.
    left = sorted(reply.json()["error"]["attempts_left"] for reply in replies if reply.error_code == "wrong_code")
    assert left == [0, 1, 2, 3, 4]
    right = api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON, "code": code}, token=token)
    assert right.error_code == "too_many_attempts"


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


# -- retries of a send, through a real SMTP relay ----------------------------------------------------


@pytest.fixture
def relay():
    with running_relay() as running:
        yield running


@pytest.fixture
def make_relayed(dynamodb_local, local_table: str, clock: FakeClock, relay):
    """A process of its own handing mail to the relay, per call."""
    _, port = relay

    def make() -> LambdaClient:
        services = make_services(
            table_name=local_table,
            dynamodb_endpoint=dynamodb_local.endpoint,
            clock=clock,
            mailer=SmtpRelayMailer("127.0.0.1", port),
        )
        return LambdaClient(services)

    return make


def verified_through(api: LambdaClient, relay: Relay) -> dict:
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    assert api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token).status == 202
    body = {"email": PERSON, "code": relay.last_code()}
    assert api.request("POST", f"{root}/email/contacts", json_body=body, token=token).status == 200
    return created


def race(calls) -> list:
    """Run every call at once, each on its own thread; their answers in order."""
    start = threading.Barrier(len(calls))

    def run(call):
        start.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def test_racing_retries_of_a_refused_send_mail_it_once_and_never_again(make_relayed, relay):
    mailbox, _ = relay
    first_process, second_process = make_relayed(), make_relayed()
    created = verified_through(first_process, mailbox)
    mailbox.refuse_next(1)
    refused = send(first_process, created, "k")
    assert (refused.status, refused.json()["status"]) == (202, "failed")
    assert mailbox.refused == 1 and len(mailbox.messages) == 1  # the code only

    retries = race([lambda api=api: send(api, created, "k") for api in (first_process, second_process) * 4])
    assert {(reply.status, reply.json()["status"]) for reply in retries} == {(200, "accepted")}
    assert {reply.json()["event"]["id"] for reply in retries} == {refused.json()["event"]["id"]}
    mailbox.wait_for(2)
    # Whatever else a racing retry did, none mailed it a second time; nor do retries after it went.
    race([lambda api=api: send(api, created, "k") for api in (first_process, second_process) * 4])
    assert len(mailbox.messages) == 2 and mailbox.refused == 1
    assert mailbox.messages[1]["Message-ID"] == refused.json()["message_id"]
    events = first_process.poll(created, limit=100).json()["events"]
    assert [(event["type"], event["data"].get("attempt")) for event in events] == [
        ("email.sent", None),
        ("email.failed", 1),
        ("email.delivered", 2),
    ]


def test_retries_while_the_hand_off_is_in_flight_mail_nothing(make_relayed, relay):
    mailbox, _ = relay
    first_process, second_process = make_relayed(), make_relayed()
    created = verified_through(first_process, mailbox)
    mailbox.open.clear()
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(send, first_process, created, "k")
        mailbox.wait_until(lambda relay: relay.waiting == 1)
        retries = race([lambda api=api: send(api, created, "k") for api in (first_process, second_process) * 3])
        assert {(reply.status, reply.json()["status"]) for reply in retries} == {(200, "accepted")}
        mailbox.open.set()
        assert first.result().status == 202
    assert len(mailbox.messages) == 2  # the code, then the message once
    types = [event["type"] for event in first_process.poll(created, limit=100).json()["events"]]
    assert types == ["email.sent", "email.delivered"]


# -- contact writes racing the address's deletion ------------------------------------------------


def items_under(endpoint: str, table: str, address_id: str) -> list[str]:
    """The sort keys of every item still stored under the address."""
    client = make_client(Settings(dynamodb_endpoint=endpoint))
    items = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.address_pk(address_id)}},
        ConsistentRead=True,
    )["Items"]
    return sorted(item["sk"]["S"] for item in items)


@pytest.mark.parametrize("operation", ["new contact", "new code", "removal"])
def test_a_contact_write_overtaken_by_the_address_deletion_leaves_nothing_under_it(
    make_api, dynamodb_local, local_table: str, clock: FakeClock, operation: str
):
    """The deletion runs, whole, between the contact request's authentication and its first write."""
    carrier = Carrier(delivered=True)
    settings = Settings(
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        create_rate_per_minute=10_000,
        poll_rate_per_minute=10_000,
    )
    client = make_client(settings)
    api = LambdaClient(Services.build(settings, client=client, waiter=NotifyingWaiter(), clock=clock, mailer=carrier))
    deleter = make_api(carrier)
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    if operation != "new contact":
        assert api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token).status == 202
        clock.advance(61)
    mailed = len(carrier.sent)
    deleted = []

    def delete_first(model, **_) -> None:
        if model.name in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems") and not deleted:
            deleted.append(deleter.request("DELETE", root, token=token).status)

    client.meta.events.register("before-call.dynamodb", delete_first)
    if operation == "removal":
        reply = api.request("DELETE", f"{root}/email/contacts/{PERSON}", token=token)
    else:
        reply = api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token)

    assert deleted == [200]
    assert items_under(dynamodb_local.endpoint, local_table, created["address"]["id"]) == []
    assert (reply.status, reply.error_code) == (401, "unauthorized")
    assert len(carrier.sent) == mailed


def race_deletion(api: LambdaClient, endpoint: str, table: str) -> tuple[list[str], set[int]]:
    """Five contact requests and the deletion of their address, let go at once: what is left, what they heard."""
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    start = threading.Barrier(6)

    def ask(index: int):
        start.wait()
        return api.request("POST", f"{root}/email/contacts", json_body={"email": f"p{index}@example.org"}, token=token)

    def delete():
        start.wait()
        return api.request("DELETE", root, token=token)

    with ThreadPoolExecutor(max_workers=6) as pool:
        asked = [pool.submit(ask, index) for index in range(5)]
        deletion = pool.submit(delete)
    assert deletion.result().status == 200
    return items_under(endpoint, table, created["address"]["id"]), {future.result().status for future in asked}


def test_contact_requests_racing_the_address_deletion_leave_nothing_under_it(make_api, dynamodb_local, local_table):
    api = make_api(Carrier(delivered=True))
    rounds = [race_deletion(api, dynamodb_local.endpoint, local_table) for _ in range(8)]
    assert [left for left, _ in rounds if left] == []
    assert set().union(*(answers for _, answers in rounds)) <= {202, 401}
