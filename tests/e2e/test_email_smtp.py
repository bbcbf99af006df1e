"""Mail sent over real SMTP to `cairn serve`, read back over HTTP."""

from __future__ import annotations

import smtplib
import threading
import time
from email.message import EmailMessage

import pytest

from tests.e2e.test_serve import auth, provision
from tests.support.serve import ServeProcess

REPORT = b"%PDF-1.4\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"


def test_mail_wakes_a_long_poll_and_its_attachment_downloads(served: ServeProcess):
    with served.client() as client:
        created = provision(client)
        events_url = created["endpoints"]["events_url"]
        result: dict = {}

        def long_poll() -> None:
            begun = time.monotonic()
            result["reply"] = client.get(events_url, params={"wait": 20}, headers=auth(created))
            result["elapsed"] = time.monotonic() - begun

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.5)
        message = EmailMessage()
        message["From"] = "Renée Lefèvre <renee@bureau.example.fr>"
        message["To"] = created["address"]["email"]
        message["Subject"] = "Rapport signé ✓"
        message.set_content("Bonjour, le rapport est joint.")
        message.add_attachment(REPORT, maintype="application", subtype="pdf", filename="rapport signé.pdf")
        with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
            assert smtp.send_message(message) == {}
        poller.join(30)

        # Before its own 20 s timeout: it woke on the mail.
        assert result["elapsed"] < 20, "the poll waited for its timeout instead of waking"
        [event] = result["reply"].json()["events"]
        data = event["data"]
        assert (event["type"], event["source"], event["ingress_surface"]) == ("email.received", "email", "email")
        assert (data["from"], data["subject"]) == ("Renée Lefèvre <renee@bureau.example.fr>", "Rapport signé ✓")
        assert data["text"] == "Bonjour, le rapport est joint.\n"
        assert data["attachments"] == [
            {"id": "att_1", "filename": "rapport signé.pdf", "size": len(REPORT), "content_type": "application/pdf"}
        ]
        download = client.get(f"{events_url}/{event['id']}/attachments/att_1", headers=auth(created))
        assert download.status_code == 200
        assert download.content == REPORT
        assert download.headers["content-length"] == str(len(REPORT))
        assert download.headers["content-type"] == "application/pdf"
        assert "filename*=UTF-8''rapport%20sign%C3%A9.pdf" in download.headers["content-disposition"]


def test_a_blind_copy_arrives_and_replays_as_the_same_event(served: ServeProcess):
    with served.client() as client:
        created = provision(client)
        raw = "From: boss@example.org\r\nTo: team@example.org\r\nSubject: Quietly\r\n\r\nFor your eyes.\r\n"
        with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
            smtp.sendmail("boss@example.org", [created["address"]["email"]], raw)
        [event] = client.get(created["endpoints"]["events_url"], params={"wait": 10}, headers=auth(created)).json()[
            "events"
        ]
        assert event["data"]["to"] == ["team@example.org"]
        replayed = client.post(
            created["endpoints"]["address_url"] + "/email/replay",
            json={"message_id": event["data"]["message_id"]},
            headers=auth(created),
        )
        assert replayed.status_code == 200
        assert replayed.json() == {"duplicate": True, "event": {"id": event["id"], "sequence": event["sequence"]}}


def test_mail_for_other_domains_is_refused_at_rcpt(served: ServeProcess):
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
        with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
            smtp.sendmail("a@example.org", ["someone@example.org"], "Subject: relay?\r\n\r\nno\r\n")
    [(code, _)] = refused.value.recipients.values()
    assert code == 550


def test_a_message_takes_at_most_a_hundred_recipients(served: ServeProcess):
    """Unbounded, 20,000 recipients took seconds of one thread to sort out, and as many rate counts."""
    with served.client() as client:
        created = provision(client)
    domain = created["address"]["email"].rpartition("@")[2]
    recipients = [created["address"]["email"]] + [f"addr_{n:026d}@{domain}" for n in range(100)]
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=30) as smtp:
        refused = smtp.sendmail("a@example.org", recipients, "Subject: many\r\n\r\nhi\r\n")
    assert list(refused) == recipients[100:] and refused[recipients[100]][0] == 452


def test_a_message_sent_twice_makes_one_event_and_mail_without_message_id_makes_two(served: ServeProcess):
    """A sender's server retrying after a timeout resends the same message under the same Message-ID."""
    with served.client() as client:
        created = provision(client)
        email = created["address"]["email"]
        message = EmailMessage()
        message["From"] = "approver@example.org"
        message["To"] = email
        message["Subject"] = "APPROVE"
        message["Message-ID"] = "<approval-7@example.org>"
        message.set_content("APPROVE")
        plain = "From: a@example.org\r\nSubject: no id\r\n\r\nsame text\r\n"
        for _ in range(2):
            with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
                assert smtp.send_message(message) == {}
                smtp.sendmail("a@example.org", [email], plain)

        events_url = created["endpoints"]["events_url"]
        events = client.get(events_url, params={"wait": 10}, headers=auth(created)).json()["events"]
        while len(events) < 3:
            more = client.get(events_url, params={"after": events[-1]["sequence"], "wait": 5}, headers=auth(created))
            assert more.json()["events"], events
            events += more.json()["events"]
        time.sleep(0.5)  # a second event for the resend, had there been one, is stored by now
        events = client.get(events_url, headers=auth(created)).json()["events"]
        subjects = sorted(event["data"]["subject"] for event in events)
        assert subjects == ["APPROVE", "no id", "no id"]
        # The receiver's id of the first delivery stays the replay key.
        [approval] = [event for event in events if event["data"]["subject"] == "APPROVE"]
        replayed = client.post(
            created["endpoints"]["address_url"] + "/email/replay",
            json={"message_id": approval["data"]["message_id"]},
            headers=auth(created),
        )
        assert replayed.json() == {"duplicate": True, "event": {"id": approval["id"], "sequence": approval["sequence"]}}


def test_mail_past_an_address_rate_is_refused_at_rcpt_for_that_address_only(tmp_path, dynamodb_local, streamed_table):
    env = {"CAIRN_EMAIL_RATE_PER_MINUTE": "1"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server:
        with server.client() as client:
            busy, quiet = provision(client), provision(client)
            recipients = [busy["address"]["email"], quiet["address"]["email"]]
            with smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=10) as smtp:
                # Naming an address and dropping the message spends none of its rate: only mail taken counts.
                smtp.ehlo()
                for _ in range(3):
                    assert smtp.mail("a@example.org")[0] == 250
                    assert smtp.rcpt(recipients[0])[0] == 250
                    assert smtp.rset()[0] == 250
                assert smtp.sendmail("a@example.org", recipients[:1], "Subject: one\r\n\r\n1\r\n") == {}
                refused = smtp.sendmail("a@example.org", recipients, "Subject: two\r\n\r\n2\r\n")
            assert refused == {recipients[0]: (450, refused[recipients[0]][1])}
            busy_events = client.get(busy["endpoints"]["events_url"], headers=auth(busy)).json()["events"]
            quiet_events = client.get(quiet["endpoints"]["events_url"], headers=auth(quiet)).json()["events"]
            assert [event["data"]["subject"] for event in busy_events] == ["one"]
            assert [event["data"]["subject"] for event in quiet_events] == ["two"]
            # An address listed twice in one envelope is one message to it, counted once.
            twice = provision(client)
            with smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=10) as smtp:
                listed = [twice["address"]["email"]] * 2
                assert smtp.sendmail("a@example.org", listed, "Subject: three\r\n\r\n3\r\n") == {}
            twice_events = client.get(twice["endpoints"]["events_url"], headers=auth(twice)).json()["events"]
            assert [event["data"]["subject"] for event in twice_events] == ["three"]
            # Two senders both named it while its rate was left: the second message is refused, not lost.
            raced = provision(client)
            with (
                smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=10) as first,
                smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=10) as second,
            ):
                for smtp in (first, second):
                    smtp.ehlo()
                    assert smtp.mail("a@example.org")[0] == 250
                    assert smtp.rcpt(raced["address"]["email"])[0] == 250
                assert first.data("Subject: first\r\n\r\n1\r\n")[0] == 250
                assert second.data("Subject: second\r\n\r\n2\r\n")[0] == 450
            raced_events = client.get(raced["endpoints"]["events_url"], headers=auth(raced)).json()["events"]
            assert [event["data"]["subject"] for event in raced_events] == ["first"]


def test_stored_mail_goes_with_its_address_and_mail_for_no_address_is_not_kept(served: ServeProcess):
    mail_dir = served.data_dir / "email"

    def kept() -> list[str]:
        return sorted(path.name for path in mail_dir.iterdir() if not path.name.startswith("."))

    with served.client() as client:
        created = provision(client)
        nobody = "addr_" + "a" * 26 + "@" + created["address"]["email"].rpartition("@")[2]
        with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
            assert smtp.sendmail("a@example.org", [created["address"]["email"]], "Subject: kept\r\n\r\n1\r\n") == {}
            assert smtp.sendmail("a@example.org", [nobody], "Subject: for nobody\r\n\r\n2\r\n") == {}
        [event] = client.get(created["endpoints"]["events_url"], headers=auth(created)).json()["events"]
        assert kept() == [event["data"]["message_id"]], "mail for no address is not kept"
        assert client.delete(created["endpoints"]["address_url"], headers=auth(created)).status_code == 200
        assert kept() == [], "deleting the address deletes its stored mail"
