"""Outbound mail through SES v2 on moto, and SES's published events turned into outcome events."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from cairn.email.outbound_ports import ComposedMessage, MailerError
from cairn.email.ses_mailer import SesMailer
from cairn.email.ses_outcomes import outcome_report
from cairn.entrypoints import outbound_events_handler
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, path_of
from tests.support.mail import LambdaContext

DOMAIN = "mail.example.com"
PERSON = "ada@example.org"
REGION = "us-east-1"


def sent_by_ses() -> list[Any]:
    return ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages


@pytest.fixture
def ses(moto_env) -> Any:
    client = boto3.client("sesv2", region_name=REGION)
    client.create_email_identity(EmailIdentity=DOMAIN)
    return client


@pytest.fixture
def api(ses, clock: FakeClock, monkeypatch) -> LambdaClient:
    """The API sending through SES, and the outcome function on the same services."""
    client = LambdaClient.on_moto(clock, outbound="ses", email_domain=DOMAIN, ses_configuration_set="cairn-out")
    monkeypatch.setattr(outbound_events_handler, "services", client.services)
    return client


def test_the_ses_mailer_sends_the_raw_message_from_a_verified_identity(ses):
    mailer = SesMailer(ses, configuration_set=None)
    raw = f"From: a@{DOMAIN}\r\nTo: {PERSON}\r\nSubject: Hi\r\nMessage-ID: <x@{DOMAIN}>\r\n\r\nHello\r\n".encode()
    handoff = mailer.send(ComposedMessage(f"a@{DOMAIN}", PERSON, f"<x@{DOMAIN}>", raw, (("cairn_send", "e"),)))
    assert handoff.provider_message_id and handoff.outcome is None
    [message] = sent_by_ses()
    assert message.source == f"a@{DOMAIN}" and "Hello" in message.raw_data
    with pytest.raises(MailerError) as refused:
        mailer.send(ComposedMessage("a@unverified.example", PERSON, "<y@x>", raw.replace(DOMAIN.encode(), b"x")))
    assert refused.value.permanent


def ses_record(
    event_type: str, address_id: str, send_event_id: str, *, attempt: str | None = None, **part: Any
) -> dict[str, Any]:
    """An SNS notification carrying one SES event-publishing record, as the configuration set sends it."""
    tags = {"cairn_address": [address_id], "cairn_send": [send_event_id], "ses:configuration-set": ["x"]}
    if attempt is not None:
        tags["cairn_attempt"] = [attempt]
    record = {
        "eventType": event_type,
        "mail": {
            "messageId": "0100018c-ses-id",
            "commonHeaders": {"messageId": "<m@mail.example.com>"},
            "tags": tags,
        },
        **part,
    }
    return {"Records": [{"EventSource": "aws:sns", "Sns": {"MessageId": "n1", "Message": json.dumps(record)}}]}


def test_a_send_goes_out_through_ses_and_its_outcome_arrives_later(api: LambdaClient):
    created = api.provision(name="approvals")
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    assert created["address"]["email"].endswith("@" + DOMAIN)
    assert api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token).status == 202
    code = re.search(r"code is: (\d{6})", sent_by_ses()[-1].raw_data.replace("=\r\n", "")).group(1)
    body = {"email": PERSON, "code": code}
    assert api.request("POST", f"{root}/email/contacts", json_body=body, token=token).status == 200
    message = {"to": PERSON, "subject": "Approve?", "text": "Yes or no."}
    sends = []
    for key in ("a", "b"):
        reply = api.request(
            "POST", f"{root}/email/send", json_body=message, headers={"Idempotency-Key": key}, token=token
        )
        assert reply.status == 202 and reply.json()["status"] == "accepted"
        sends.append(reply.json()["event"]["id"])
    assert sent_by_ses()[-1].source == created["address"]["email"]
    # SES reports nothing at once: only the sends are in the feed.
    assert [e["type"] for e in api.poll(created).json()["events"]] == ["email.sent", "email.sent"]

    address_id = created["address"]["id"]
    delivery = ses_record("Delivery", address_id, sends[0], delivery={"smtpResponse": "250 2.0.0 OK"})
    outbound_events_handler.lambda_handler(delivery, LambdaContext())
    outbound_events_handler.lambda_handler(delivery, LambdaContext())  # SNS delivers at least once
    bounce = {"bounceType": "Permanent", "bounceSubType": "General", "bouncedRecipients": [{"diagnosticCode": "550"}]}
    outbound_events_handler.lambda_handler(ses_record("Bounce", address_id, sends[1], bounce=bounce), LambdaContext())
    events = api.poll(created).json()["events"]
    assert [e["type"] for e in events] == ["email.sent", "email.sent", "email.delivered", "email.bounced"]
    assert {e["ingress_surface"] for e in events} == {"outbound"}
    delivered, bounced = events[2]["data"], events[3]["data"]
    assert (delivered["send_event_id"], delivered["provider_message_id"]) == (sends[0], "0100018c-ses-id")
    assert delivered["detail"] == "250 2.0.0 OK"
    assert bounced["detail"] == "Permanent / General / 550"


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"eventType": "Open", "mail": {"tags": {"cairn_address": ["x"], "cairn_send": ["y"]}}}),
        json.dumps({"eventType": "Delivery", "mail": {"tags": {}}}),
        json.dumps({"eventType": "Delivery", "mail": {"tags": {"cairn_address": ["../x"], "cairn_send": ["e"]}}}),
        json.dumps([1, 2]),
        json.dumps(
            {
                "eventType": "Delivery",
                "mail": {"tags": {"cairn_address": ["x"], "cairn_send": ["evt_1_00000000"], "cairn_attempt": ["0"]}},
            }
        ),
    ],
)
def test_records_that_report_no_outcome_of_a_cairn_send_are_ignored(text: str):
    assert outcome_report(text) is None


def test_an_outcome_for_a_deleted_address_is_dropped_quietly(api: LambdaClient):
    created = api.provision()
    api.request("DELETE", path_of(created["endpoints"]["address_url"]), token=created["credentials"]["read_token"])
    event = ses_record("Delivery", created["address"]["id"], "evt_1_00000000")
    outbound_events_handler.lambda_handler(event, LambdaContext())


def test_a_send_ses_refused_goes_out_on_retry_and_its_later_outcome_is_the_new_attempts(api: LambdaClient, ses):
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token)
    code = re.search(r"code is: (\d{6})", sent_by_ses()[-1].raw_data.replace("=\r\n", "")).group(1)
    api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON, "code": code}, token=token)
    message, key = {"to": PERSON, "subject": "Approve?", "text": "Yes or no."}, {"Idempotency-Key": "a"}
    ses.delete_email_identity(EmailIdentity=DOMAIN)  # SES refuses the sender now
    refused = api.request("POST", f"{root}/email/send", json_body=message, headers=key, token=token)
    assert refused.json()["status"] == "failed"
    ses.create_email_identity(EmailIdentity=DOMAIN)
    retried = api.request("POST", f"{root}/email/send", json_body=message, headers=key, token=token)
    assert (retried.status, retried.json()["status"]) == (200, "accepted")
    assert len(sent_by_ses()) == 2  # the code, then the message once
    send_id = refused.json()["event"]["id"]
    delivery = ses_record("Delivery", created["address"]["id"], send_id, attempt="2")
    outbound_events_handler.lambda_handler(delivery, LambdaContext())
    outbound_events_handler.lambda_handler(delivery, LambdaContext())
    events = api.poll(created).json()["events"]
    assert [(e["type"], e["data"].get("attempt")) for e in events] == [
        ("email.sent", None),
        ("email.failed", 1),
        ("email.delivered", 2),
    ]
