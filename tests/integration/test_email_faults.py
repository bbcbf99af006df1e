"""Storage faults at every DynamoDB call of inbound email.

One message addressed to two Cairn addresses goes through the email Lambda
handler while the Nth DynamoDB call fails, for every N and every kind of
fault (see `tests.support.faults`). The handler either delivers to both
addresses or raises, so that SES/Lambda delivers again; it never returns
having dropped one. After the redelivery each address has exactly one
`email.received` event, with gap-free sequences. Replay of a stored message
(`POST .../email/replay`) answers a success or a 503 with `Retry-After`,
and retrying it leaves exactly one event.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from cairn.dynamodb.raw_messages import raw_message_store
from cairn.entrypoints import email_handler
from cairn.errors import Unavailable
from tests.support.faults import FAULTS, FaultInjector, assert_success_or_retryable, calls_made, faulty_api
from tests.support.lambda_client import LambdaClient, Reply, path_of
from tests.support.mail import LambdaContext, fixture_message, new_message_id, ses_event

# What storage trouble looks like when it reaches the handler; anything else is a bug.
STORAGE_TROUBLE = (Unavailable, ClientError, BotoCoreError)


@pytest.fixture(scope="module")
def faulty(dynamodb_local, tmp_path_factory) -> tuple[LambdaClient, FaultInjector]:
    """One table and one message folder for the module: every case uses addresses of its own."""
    return faulty_api(dynamodb_local.endpoint, email_blob_dir=tmp_path_factory.mktemp("email"))


@pytest.fixture
def mail(faulty, monkeypatch) -> tuple[LambdaClient, FaultInjector]:
    """The email handler wired to the faulty services."""
    api, _ = faulty
    monkeypatch.setattr(email_handler, "services", api.services)
    return faulty


def email_of(created: dict[str, Any]) -> str:
    return created["address"]["email"]


def stored_message(api: LambdaClient, fixture: str, *addresses: dict[str, Any]) -> str:
    """A message to `addresses`, kept the way SES keeps it before invoking the handler."""
    message_id = new_message_id()
    raw = fixture_message(fixture, *map(email_of, addresses))
    raw_message_store(api.services.settings).save(message_id, raw)
    return message_id


def invoke(event: dict[str, Any]) -> None:
    email_handler.lambda_handler(copy.deepcopy(event), LambdaContext())


def emails(api: LambdaClient, created: dict[str, Any]) -> list[dict[str, Any]]:
    reply = api.poll(created, limit=1000)
    assert reply.status == 200, reply.text
    events = reply.json()["events"]
    assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
    return [event for event in events if event["type"] == "email.received"]


def assert_one_email_each(api: LambdaClient, message_id: str, *addresses: dict[str, Any]) -> None:
    for created in addresses:
        [event] = emails(api, created)
        assert event["data"]["message_id"] == message_id


@pytest.mark.parametrize("kind", FAULTS)
def test_a_fault_during_ingest_is_raised_for_redelivery_and_redelivery_makes_one_event_each(mail, kind: str):
    api, injector = mail
    baseline = (api.provision(), api.provision())
    event = ses_event(stored_message(api, "two_recipients.eml", *baseline), list(map(email_of, baseline)))
    total = calls_made(injector, lambda: invoke(event))
    for at in range(1, total + 1):
        addresses = (api.provision(), api.provision())
        message_id = stored_message(api, "two_recipients.eml", *addresses)
        event = ses_event(message_id, list(map(email_of, addresses)))
        injector.arm(kind, at)
        try:
            invoke(event)
        except STORAGE_TROUBLE:
            pass
        else:
            # Returning tells SES the message is delivered: it must be, to both.
            assert_one_email_each(api, message_id, *addresses)
        finally:
            injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        invoke(event)
        assert_one_email_each(api, message_id, *addresses)


def replay(api: LambdaClient, created: dict[str, Any], message_id: str) -> Reply:
    path = f"{path_of(created['endpoints']['address_url'])}/email/replay"
    return api.request("POST", path, json_body={"message_id": message_id}, token=created["credentials"]["read_token"])


@pytest.mark.parametrize("kind", FAULTS)
def test_a_fault_during_replay_is_retryable_and_a_retry_makes_one_event(faulty, kind: str):
    api, injector = faulty
    baseline = api.provision()
    message_id = stored_message(api, "plain.eml", baseline)
    total = calls_made(injector, lambda: replay(api, baseline, message_id))
    for at in range(1, total + 1):
        # The message was stored but its delivery was lost: replay is the recovery.
        created = api.provision()
        message_id = stored_message(api, "plain.eml", created)
        injector.arm(kind, at)
        first = replay(api, created, message_id)
        injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        assert_success_or_retryable(first)
        retry = replay(api, created, message_id)
        assert retry.status in (200, 201), retry.text
        [event] = emails(api, created)
        assert retry.json()["event"]["id"] == event["id"]
        if first.status == 201:
            assert retry.json() == {"duplicate": True, "event": first.json()["event"]}
