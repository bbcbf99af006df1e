"""Outbound mail over HTTP on `cairn serve`, through a real SMTP relay the test runs.

A person's mailbox is an aiosmtpd server: the verification code is read out
of the mail it received, the answer to the sent mail goes back through
Cairn's own SMTP listener, and one feed shows the whole conversation.
"""

from __future__ import annotations

import re
import smtplib
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import quote

import pytest

from cairn.local.dynamodb_local import DynamoDBLocal
from tests.e2e.test_serve import auth, provision
from tests.support.relay import Relay, running_relay
from tests.support.serve import ServeProcess

PERSON = "ada@example.org"


@pytest.fixture
def relay() -> Iterator[tuple[Relay, int]]:
    with running_relay() as (mailbox, port):
        yield mailbox, port


@pytest.fixture
def relayed(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path, relay: tuple[Relay, int]
) -> Iterator[ServeProcess]:
    _, port = relay
    extra = ["--smtp-relay", f"127.0.0.1:{port}"]
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, extra_args=extra) as s:
        yield s


def test_verify_send_and_read_the_answer_in_one_feed(relayed: ServeProcess, relay: tuple[Relay, int]):
    mailbox, _ = relay
    with relayed.client() as client:
        created = provision(client)
        root = created["endpoints"]["address_url"]
        headers = auth(created)

        asked = client.post(f"{root}/email/contacts", json={"email": PERSON}, headers=headers)
        assert asked.status_code == 202, asked.text
        code_mail = mailbox.wait_for(1)
        assert code_mail["From"] == created["address"]["email"] and code_mail["To"] == PERSON
        code = re.search(r"code is: (\d{6})", code_mail.get_content()).group(1)
        assert code not in asked.text
        verified = client.post(f"{root}/email/contacts", json={"email": PERSON, "code": code}, headers=headers)
        assert verified.status_code == 200 and verified.json()["contact"]["status"] == "verified"

        message = {"to": PERSON, "subject": "May I pay invoice 42?", "text": "Answer yes or no."}
        sent = client.post(f"{root}/email/send", json=message, headers={**headers, "Idempotency-Key": "ask-42"})
        assert sent.status_code == 202, sent.text
        question = mailbox.wait_for(2)
        assert question["Message-ID"] == sent.json()["message_id"]
        assert question.get_content().strip() == "Answer yes or no."

        answer = EmailMessage()
        answer["From"] = PERSON
        answer["To"] = question["From"]
        answer["Subject"] = "Re: " + question["Subject"]
        answer["In-Reply-To"] = question["Message-ID"]
        answer["References"] = question["Message-ID"]
        answer.set_content("Yes, pay it.")
        with smtplib.SMTP("127.0.0.1", relayed.smtp_port, timeout=10) as smtp:
            assert smtp.send_message(answer) == {}

        events = _events_until(client, created, count=3)
        assert [(e["type"], e["ingress_surface"]) for e in events] == [
            ("email.sent", "outbound"),
            ("email.delivered", "outbound"),
            ("email.received", "email"),
        ]
        assert [e["sequence"] for e in events] == [1, 2, 3]
        assert events[1]["data"]["message_id"] == sent.json()["message_id"]
        assert events[2]["data"]["in_reply_to"] == sent.json()["message_id"]
        assert events[2]["data"]["text"].strip() == "Yes, pay it."

        again = client.post(f"{root}/email/send", json=message, headers={**headers, "Idempotency-Key": "ask-42"})
        assert again.status_code == 200 and again.json()["event"] == sent.json()["event"]
        time.sleep(0.5)
        assert len(mailbox.messages) == 2, "a retry with the same key sent the mail again"


def test_a_send_the_relay_refused_goes_out_on_retry_once(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path
):
    with running_relay() as (refusing, port):
        extra = ["--smtp-relay", f"127.0.0.1:{port}"]
        serving = ServeProcess(
            tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, extra_args=extra
        )
        with serving as served, served.client() as client:
            created = provision(client)
            root = created["endpoints"]["address_url"]
            headers = auth(created)
            assert client.post(f"{root}/email/contacts", json={"email": PERSON}, headers=headers).status_code == 202
            code = {"email": PERSON, "code": refusing.last_code()}
            assert client.post(f"{root}/email/contacts", json=code, headers=headers).status_code == 200

            refusing.refuse_next(1, "554 5.7.1 Relay busy, try later")
            message = {"to": PERSON, "subject": "Ship it?", "text": "Yes or no."}
            keyed = {**headers, "Idempotency-Key": "ship-7"}
            first = client.post(f"{root}/email/send", json=message, headers=keyed)
            assert (first.status_code, first.json()["status"]) == (202, "failed")
            retried = client.post(f"{root}/email/send", json=message, headers=keyed)
            assert (retried.status_code, retried.json()["status"]) == (200, "accepted")
            again = client.post(f"{root}/email/send", json=message, headers=keyed)
            assert (again.status_code, again.json()["status"]) == (200, "accepted")

            events = _events_until(client, created, count=3)
            assert [(e["type"], e["data"].get("attempt")) for e in events] == [
                ("email.sent", None),
                ("email.failed", 1),
                ("email.delivered", 2),
            ]
            assert "554" in events[1]["data"]["detail"]
        # The relay refused once and took the message once: the code, then the message.
        assert refusing.refused == 1
        assert [mail["Message-ID"] for mail in refusing.to(PERSON)][1:] == [first.json()["message_id"]]


def test_with_an_operator_sender_mail_goes_from_it_and_answers_reach_the_address(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path
):
    with running_relay() as (mailbox, port):
        options = {
            "dynamodb_endpoint": dynamodb_local.endpoint,
            "table": streamed_table,
            "extra_args": ["--smtp-relay", f"127.0.0.1:{port}"],
            "env": {"CAIRN_OUTBOUND_FROM": "agents@cairn.localhost"},
        }
        with ServeProcess(tmp_path, **options) as served, served.client() as client:
            created = provision(client)
            own = created["address"]["email"]
            root = created["endpoints"]["address_url"]
            headers = auth(created)
            assert client.post(f"{root}/email/contacts", json={"email": PERSON}, headers=headers).status_code == 202
            code = {"email": PERSON, "code": mailbox.last_code()}
            assert client.post(f"{root}/email/contacts", json=code, headers=headers).status_code == 200
            message = {"to": PERSON, "subject": "Ship it?", "text": "Yes or no."}
            sent = client.post(f"{root}/email/send", json=message, headers={**headers, "Idempotency-Key": "k"})
            assert sent.status_code == 202, sent.text
            question = mailbox.wait_for(2)
            assert (question["From"], question["Reply-To"]) == ("agents@cairn.localhost", own)
            # The person answers where Reply-To says.
            answer = EmailMessage()
            answer["From"], answer["To"], answer["Subject"] = PERSON, question["Reply-To"], "Re: Ship it?"
            answer["In-Reply-To"] = question["Message-ID"]
            answer.set_content("Ship it.")
            with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
                assert smtp.send_message(answer) == {}
            events = _events_until(client, created, count=3)
            assert [e["type"] for e in events] == ["email.sent", "email.delivered", "email.received"]
            assert (events[0]["data"]["from"], events[0]["data"]["reply_to"]) == ("agents@cairn.localhost", own)
            assert events[2]["data"]["in_reply_to"] == sent.json()["message_id"]


def test_without_a_relay_mail_lands_in_the_outbox_folder(served: ServeProcess, tmp_path: Path):
    with served.client() as client:
        created = provision(client)
        root = created["endpoints"]["address_url"]
        headers = auth(created)
        assert client.post(f"{root}/email/contacts", json={"email": PERSON}, headers=headers).status_code == 202
        outbox = tmp_path / "data" / "outbox"
        [code_file] = list(outbox.glob("*.eml"))
        assert code_file.stat().st_mode & 0o077 == 0
        code = re.search(rb"code is: (\d{6})", code_file.read_bytes()).group(1).decode()
        client.post(f"{root}/email/contacts", json={"email": PERSON, "code": code}, headers=headers)
        message = {"to": PERSON, "subject": "Hello", "text": "Written offline."}
        sent = client.post(f"{root}/email/send", json=message, headers={**headers, "Idempotency-Key": "k"})
        assert sent.status_code == 202
        assert len(list(outbox.glob("*.eml"))) == 2
        types = [e["type"] for e in _events_until(client, created, count=2)]
        assert types == ["email.sent", "email.delivered"]


def _events_until(client, created: dict, *, count: int) -> list[dict]:
    deadline = time.monotonic() + 20
    while True:
        reply = client.get(created["endpoints"]["events_url"], params={"wait": 2}, headers=auth(created))
        events = reply.json()["events"]
        if len(events) >= count or time.monotonic() > deadline:
            return events


def test_contacts_whose_names_need_percent_encoding_are_removed(served: ServeProcess):
    """A `/` or `%` in a contact's name travels encoded, as the SDK sends it, and is decoded once, as on Lambda."""
    with served.client() as client:
        created = provision(client)
        root, headers = created["endpoints"]["address_url"], auth(created)
        odd = ["a/b@example.org", "x%41@example.org"]
        for email in odd:
            assert client.post(f"{root}/email/contacts", json={"email": email}, headers=headers).status_code == 202
        for email in odd:
            removed = client.delete(f"{root}/email/contacts/{quote(email, safe='@')}", headers=headers)
            assert removed.status_code == 200, removed.text
        assert client.get(f"{root}/email/contacts", headers=headers).json()["contacts"] == []
