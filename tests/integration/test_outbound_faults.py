"""Storage faults at every DynamoDB call of a send: the answer is a success or retryable, and the message goes once.

As `test_faults.py` does for the other writes: a botocore hook fails the Nth
call of one send, for every N and every kind of fault; then the client
retries with the same `Idempotency-Key` once the failed request's hand-off
lease has run out, and again. Whatever failed, the person gets the message
exactly once, and the feed holds one `email.sent` and its one outcome. The
same holds for the retry that hands a refused send over again: a fault at
any of its calls, then more retries, and the message goes once, after the
one refusal.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.email.outbound_ports import ComposedMessage, Handoff, MailerError
from cairn.email.sending import HANDOFF_LEASE_SECONDS
from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.faults import FAULTS, FaultInjector, assert_success_or_retryable, calls_made
from tests.support.lambda_client import LambdaClient, path_of
from tests.support.mail import verified_address

PERSON = "ada@example.org"
MESSAGE = {"to": PERSON, "subject": "Approve?", "text": "Yes or no."}


class Relay:
    """Takes every message, except the next `refusals`, which it refuses as a busy relay would."""

    def __init__(self) -> None:
        self.sent: list[ComposedMessage] = []
        self.refusals = 0
        self._lock = threading.Lock()

    def send(self, message: ComposedMessage) -> Handoff:
        with self._lock:
            if self.refusals > 0:
                self.refusals -= 1
                raise MailerError("relay answered 451", permanent=False)
            self.sent.append(message)
        return Handoff(provider_message_id=message.message_id, outcome="delivered")


@pytest.fixture(scope="module")
def faulty(dynamodb_local) -> tuple[LambdaClient, FaultInjector, Relay, FakeClock]:
    table = f"cairn-faults-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute=10_000,
        create_rate_per_minute=10_000,
        outbound_max_sends_per_day=10_000,
        # Every address verifies the same person here.
        outbound_verifications_per_recipient_per_day=10_000,
    )
    client = make_client(settings)
    ensure_table(client, table, stream=False)
    injector = FaultInjector(client)
    relay = Relay()
    clock = FakeClock()
    services = Services.build(settings, client=client, waiter=NotifyingWaiter(), clock=clock, mailer=relay)
    return LambdaClient(services), injector, relay, clock


def verified(api: LambdaClient, relay: Relay) -> dict:
    return verified_address(api, PERSON, relay.sent)


def send(api: LambdaClient, created: dict):
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    return api.request(
        "POST", f"{root}/email/send", json_body=MESSAGE, headers={"Idempotency-Key": "once"}, token=token
    )


@pytest.mark.parametrize("kind", FAULTS)
def test_a_fault_at_any_call_of_a_send_still_mails_once(faulty, kind: str):
    api, injector, relay, clock = faulty
    baseline = verified(api, relay)
    total = calls_made(injector, lambda: send(api, baseline))
    for at in range(1, total + 1):
        created = verified(api, relay)
        before = len(relay.sent)
        injector.arm(kind, at)
        first = send(api, created)
        injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        assert_success_or_retryable(first)
        clock.advance(HANDOFF_LEASE_SECONDS + 1)
        for retry in (send(api, created), send(api, created)):
            assert retry.status in (200, 202), retry.text
        assert len(relay.sent) - before == 1, f"{kind} at call {at}: mailed {len(relay.sent) - before} times"
        events = api.poll(created, limit=100).json()["events"]
        assert [event["type"] for event in events] == ["email.sent", "email.delivered"], (kind, at)
        assert [event["sequence"] for event in events] == [1, 2]


@pytest.mark.parametrize("kind", FAULTS)
def test_a_fault_at_any_call_of_a_refused_send_retried_still_mails_once(faulty, kind: str):
    api, injector, relay, clock = faulty
    baseline = verified(api, relay)
    relay.refusals = 1
    send(api, baseline)
    total = calls_made(injector, lambda: send(api, baseline))
    for at in range(1, total + 1):
        created = verified(api, relay)
        before = len(relay.sent)
        relay.refusals = 1
        assert send(api, created).json()["status"] == "failed"
        injector.arm(kind, at)
        first = send(api, created)
        injector.disarm()
        # A call DynamoDB refuses anyway (the refused attempt's outcome, claimed already) has no commit to lose.
        assert injector.fired or kind == "timeout_after_commit", f"call {at} of {total} was never made"
        assert_success_or_retryable(first)
        clock.advance(HANDOFF_LEASE_SECONDS + 1)
        for retry in (send(api, created), send(api, created)):
            assert retry.status in (200, 202), retry.text
        assert len(relay.sent) - before == 1, f"{kind} at call {at}: mailed {len(relay.sent) - before} times"
        events = api.poll(created, limit=100).json()["events"]
        assert [event["type"] for event in events] == ["email.sent", "email.failed", "email.delivered"], (kind, at)
