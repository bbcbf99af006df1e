"""Inbound email: SES receipt events in, events and attachments out (moto S3 + DynamoDB)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import EmailPolicy

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import SesModel
from pydantic import ValidationError

from cairn import jsontext
from cairn.email import mime
from cairn.email.ingest import StoredMessageMissing
from cairn.entrypoints import email_handler
from tests.support.faults import FaultInjector
from tests.support.lambda_client import LambdaClient, path_of
from tests.support.mail import BUCKET, PREFIX, Mailroom, fixture_message, new_message_id, ses_event
from tests.unit.test_event_stream import StreamingContext, stream_request

NOBODY = "addr_" + "a" * 26 + "@cairn.localhost"
STRANGER = "someone@elsewhere.example.net"
PDF_SIZE = 218
CSV = b"day,requests\r\n2026-02-01,1204\r\n2026-02-02,998\r\n"


@pytest.fixture
def make_mailroom(moto_env, clock, monkeypatch) -> Callable[..., Mailroom]:
    """A mailroom whose settings differ where a test says so."""

    def make(**overrides) -> Mailroom:
        api = LambdaClient.on_moto(clock, email_bucket=BUCKET, email_prefix=PREFIX, **overrides)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        monkeypatch.setattr(email_handler, "services", api.services)
        return Mailroom(api, s3)

    return make


@pytest.fixture
def mail(make_mailroom) -> Mailroom:
    return make_mailroom()


def email_of(created: dict) -> str:
    return created["address"]["email"]


def receive_one(mail: Mailroom, fixture: str) -> tuple[dict, dict]:
    """A new address receives `fixture`; returns the address and its email event."""
    created = mail.api.provision()
    mail.receive(fixture_message(fixture, email_of(created)), [email_of(created)])
    [event] = mail.emails(created)
    return created, event


# -- the SES event ---------------------------------------------------------------


def test_the_recorded_ses_event_is_what_powertools_expects():
    SesModel.model_validate(ses_event(new_message_id(), [NOBODY]))


def test_ses_events_powertools_would_refuse_are_still_delivered(mail: Mailroom):
    """No Subject (so no `subject` common header), scanning disabled, no DKIM verdict."""
    created = mail.api.provision()
    message_id = mail.store(fixture_message("plain.eml", email_of(created)))
    event = ses_event(message_id, [email_of(created)])
    record = event["Records"][0]["ses"]
    del record["mail"]["commonHeaders"]["subject"]
    del record["receipt"]["dkimVerdict"]
    record["receipt"]["spamVerdict"] = record["receipt"]["virusVerdict"] = {"status": "DISABLED"}
    with pytest.raises(ValidationError):
        SesModel.model_validate(event)
    mail.invoke(event)
    [received] = mail.emails(created)
    assert received["data"]["verdicts"] == {
        "spf": "pass",
        "dkim": None,
        "dmarc": "gray",
        "spam": "disabled",
        "virus": "disabled",
    }


# -- what an event holds -------------------------------------------------------------


def test_with_agentaddress_surface_mail_says_resend_as_source_and_surface(make_mailroom):
    mail = make_mailroom(email_ingress_surface="resend")
    created = mail.api.provision()
    address = email_of(created)
    mail.receive(fixture_message("plain.eml", address), [address])
    [event] = mail.emails(created)
    assert (event["type"], event["source"], event["ingress_surface"]) == ("email.received", "resend", "resend")


def test_a_plain_text_email_becomes_an_email_received_event(mail: Mailroom):
    created = mail.api.provision()
    address = email_of(created)
    message_id = mail.receive(fixture_message("plain.eml", address), [address])
    [event] = mail.emails(created)
    assert (event["type"], event["source"], event["ingress_surface"]) == ("email.received", "email", "email")
    assert event["data"] == {
        "message_id": message_id,
        "from": "Example Accounts <noreply@accounts.example.com>",
        "to": [address],
        "cc": [],
        "subject": "Your verification code is 482913",
        "date": "2026-03-03T09:14:06.000Z",
        "internet_message_id": "<CAF7x2Yq0n4p8Vb3sLq9Jd1KzM5wR6tE@mail.accounts.example.com>",
        "in_reply_to": None,
        "references": [],
        "text": "Hi,\n\nYour verification code is 482913. It expires in 10 minutes.\n\n"
        "If you did not ask for this code, ignore this message.\n\nThe Example Accounts team\n",
        "html": None,
        "truncated": False,
        "truncated_fields": [],
        "attachments": [],
        "verdicts": {"spf": "pass", "dkim": "pass", "dmarc": "gray", "spam": "pass", "virus": "pass"},
    }


def test_an_html_only_email_has_html_and_no_text(mail: Mailroom):
    _, event = receive_one(mail, "html_only.eml")
    data = event["data"]
    assert data["text"] is None
    assert '<a href="https://track.example/1Z999AA10123456784">1Z999AA10123456784</a>' in data["html"]
    assert "<p>— Shop Example</p>" in data["html"]
    assert data["from"] == "Shop Example <orders@shop.example>"


def test_multipart_alternative_gives_both_bodies_and_the_thread(mail: Mailroom):
    created, event = receive_one(mail, "alternative.eml")
    data = event["data"]
    assert data["text"] == "Build 1287 passed in 14m 02s.\nArtifacts: https://ci.example.dev/builds/1287\n"
    assert data["html"].startswith('<div dir="ltr">Build <b>1287</b>')
    assert data["to"] == [f"Nightly Agent <{email_of(created)}>"]
    assert data["cc"] == ["Release Team <release@example.dev>", "ops@example.dev"]
    assert data["in_reply_to"] == "<build-1286.1772591411@ci.example.dev>"
    assert data["references"] == ["<build-1285.1772505011@ci.example.dev>", "<build-1286.1772591411@ci.example.dev>"]


def test_non_ascii_headers_and_bodies_are_decoded(mail: Mailroom):
    created, event = receive_one(mail, "non_ascii.eml")
    data = event["data"]
    assert data["from"] == "Renée Lefèvre <renee@bureau.example.fr>"
    assert data["to"] == [f"Zoë Agent <{email_of(created)}>"]
    assert data["subject"] == "Récapitulatif de la réunion — ☕"
    assert "réunion de mardi : café à 9 h, décision à 10 h." in data["text"]
    assert "<b>récapitulatif</b> : café ☕ à 9 h." in data["html"]
    assert data["attachments"] == [
        {"id": "att_1", "filename": "procès-verbal.txt", "size": 28, "content_type": "text/plain"}
    ]
    download = mail.download(created, event["id"], "att_1")
    assert download.status == 200
    assert download.content == "Procès-verbal : approuvé.\n".encode()
    assert download.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert download.headers["Content-Disposition"] == (
        "attachment; filename=\"proc_s-verbal.txt\"; filename*=UTF-8''proc%C3%A8s-verbal.txt"
    )


def test_long_bodies_are_cut_at_the_cap_and_flagged(make_mailroom):
    mail = make_mailroom(email_text_max_bytes=11)
    _, event = receive_one(mail, "non_ascii.eml")
    data = event["data"]
    assert data["truncated"] is True
    assert data["text"] == "Bonjour Zo", "the 11th byte is half of ë: the cut drops it rather than break it"
    assert data["html"] == "<html><body"
    _, whole = receive_one(make_mailroom(), "non_ascii.eml")
    assert whole["data"]["truncated"] is False


def test_malformed_mime_still_makes_an_event_with_what_could_be_read(mail: Mailroom):
    created, event = receive_one(mail, "malformed.eml")
    data = event["data"]
    assert data["to"] == [email_of(created)]
    assert data["subject"].endswith("status report")
    assert data["date"] is None
    assert data["text"].startswith("The status is green, mostly")
    assert data["attachments"] == [
        {"id": "att_1", "filename": "data.bin", "size": 10, "content_type": "application/octet-stream"}
    ]
    assert mail.download(created, event["id"], "att_1").content == bytes(range(10))


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00\xff\xfe garbage\r\n\r\n\x80\x81", b"Subject: headers only", b"Content-Type: multipart/mixed\r\n\r\nx"],
)
def test_even_nonsense_makes_an_event(mail: Mailroom, raw: bytes):
    created = mail.api.provision()
    message_id = mail.receive(raw, [email_of(created)])
    [event] = mail.emails(created)
    assert event["data"]["message_id"] == message_id


@pytest.mark.parametrize(
    ("charset", "body", "read_as"),
    [
        ("utf-7", b"+2AA- half a pair", "\ufffd half a pair"),  # a lone surrogate, in UTF-7
        ("raw_unicode_escape", b"\\ud800 half a pair", "\ufffd half a pair"),
        ("idna", b"xn--zz", "xn--zz"),  # a codec that cannot replace what it cannot read: read as UTF-8
        ("undefined", b"plain", "plain"),
    ],
)
def test_a_body_in_any_charset_arrives_as_valid_text(mail: Mailroom, charset: str, body: bytes, read_as: str):
    """A stranger's charset decides how the body decodes, never whether the mail arrives or can be replayed."""
    created = mail.api.provision()
    to = email_of(created)
    raw = (
        f"From: someone@elsewhere.example.net\r\nTo: {to}\r\nSubject: =?utf-7?Q?+2AA-?=\r\n"
        f"Content-Type: text/plain; charset={charset}\r\n\r\n"
    ).encode() + body
    message_id = mail.receive(raw, [to])
    [event] = mail.emails(created)
    assert event["data"]["text"] == read_as
    assert "\ud800" not in event["data"]["subject"]
    assert mail.replay(created, {"message_id": message_id}).json()["event"]["id"] == event["id"]


# -- recipients and redelivery ------------------------------------------------------


def test_one_message_to_two_addresses_and_strangers_reaches_each_address_once(mail: Mailroom):
    planner, runner, deleted = mail.api.provision(), mail.api.provision(), mail.api.provision()
    deleted_path = path_of(deleted["endpoints"]["address_url"])
    assert mail.api.request("DELETE", deleted_path, token=deleted["credentials"]["read_token"]).status == 200
    raw = fixture_message("two_recipients.eml", email_of(planner), email_of(runner))
    recipients = [email_of(planner), email_of(runner), email_of(runner).upper(), NOBODY, email_of(deleted), STRANGER]
    mail.receive(raw, recipients)
    [first] = mail.emails(planner)
    [second] = mail.emails(runner)
    assert first["data"] == second["data"]
    assert first["data"]["to"] == [f"Planner <{email_of(planner)}>", f"Runner <{email_of(runner)}>"]


def test_redelivery_of_the_same_message_makes_one_event(mail: Mailroom):
    created = mail.api.provision()
    raw = fixture_message("plain.eml", email_of(created))
    message_id = mail.receive(raw, [email_of(created)])
    mail.receive(raw, [email_of(created)], message_id=message_id)
    assert len(mail.emails(created)) == 1


def test_a_resent_message_stored_under_another_id_makes_one_event(mail: Mailroom):
    # A sender's retry or a mailing list: SES stores and announces the same message twice.
    created = mail.api.provision()
    raw = fixture_message("plain.eml", email_of(created))
    first_id = mail.receive(raw, [email_of(created)])
    second_id = mail.receive(raw, [email_of(created)])
    assert first_id != second_id
    [event] = mail.emails(created)
    assert event["data"]["message_id"] == first_id
    again = mail.replay(created, {"message_id": second_id})
    assert again.json() == {"duplicate": True, "event": {"id": event["id"], "sequence": event["sequence"]}}


def test_events_claimed_under_the_receiver_id_alone_still_deduplicate_and_download(mail: Mailroom):
    # Ingest without a Message-ID claims the receiver's id, as every event stored before header claims.
    created = mail.api.provision()
    raw = fixture_message("nested_attachments.eml", email_of(created))
    without_header = b"\r\n".join(line for line in raw.split(b"\r\n") if not line.startswith(b"Message-ID:"))
    message_id = mail.receive(without_header, [email_of(created)])
    mail.store(raw, message_id)
    [event] = mail.emails(created)
    again = mail.replay(created, {"message_id": message_id})
    assert again.json() == {"duplicate": True, "event": {"id": event["id"], "sequence": event["sequence"]}}
    assert mail.download(created, event["id"], "att_2").content == CSV


def test_the_same_message_id_at_another_address_is_that_address_own_event(mail: Mailroom):
    first, second = mail.api.provision(), mail.api.provision()
    mail.receive(fixture_message("plain.eml", email_of(first)), [email_of(first)])
    mail.receive(fixture_message("plain.eml", email_of(second)), [email_of(second)])
    assert len(mail.emails(first)) == len(mail.emails(second)) == 1


def test_mail_for_expired_addresses_or_full_feeds_is_dropped_quietly(make_mailroom, clock):
    mail = make_mailroom(max_events=1, owner_reserved_events=0)
    full, expiring = mail.api.provision(), mail.api.provision(expires_in_seconds=60)
    mail.receive(fixture_message("plain.eml", email_of(full)), [email_of(full)])
    mail.receive(fixture_message("alternative.eml", email_of(full)), [email_of(full)])
    assert [event["data"]["subject"] for event in mail.emails(full)] == ["Your verification code is 482913"]
    clock.advance(61)
    mail.receive(fixture_message("plain.eml", email_of(expiring)), [email_of(expiring)])


def test_a_message_missing_from_the_bucket_is_raised_so_the_delivery_is_kept_for_replay(mail: Mailroom):
    created = mail.api.provision()
    message_id = new_message_id()
    with pytest.raises(StoredMessageMissing) as raised:
        mail.invoke(ses_event(message_id, [email_of(created)]))
    assert raised.value.message_id == message_id
    assert mail.emails(created) == []
    # Once the message is where it belongs, redelivering the kept event delivers it.
    mail.store(fixture_message("plain.eml", email_of(created)), message_id)
    mail.invoke(ses_event(message_id, [email_of(created)]))
    [event] = mail.emails(created)
    assert event["data"]["message_id"] == message_id


def test_mail_arriving_while_its_address_is_deleted_is_not_kept(mail: Mailroom, monkeypatch: pytest.MonkeyPatch):
    """The stored mail was forgotten before the address closed: a message taken in between stayed 30 days."""
    created = mail.api.provision()
    mail.receive(fixture_message("alternative.eml", email_of(created)), [email_of(created)])
    retention = mail.api.services.mail_retention
    forget = retention.forget_address

    def then_mail_arrives(address_id: str) -> None:
        forget(address_id)
        mail.receive(fixture_message("html_only.eml", email_of(created)), [email_of(created)])

    monkeypatch.setattr(retention, "forget_address", then_mail_arrives)
    token = created["credentials"]["read_token"]
    assert mail.api.request("DELETE", path_of(created["endpoints"]["address_url"]), token=token).status == 200
    assert mail.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("KeyCount") == 0


def test_mail_only_for_strangers_needs_no_stored_message(mail: Mailroom):
    mail.invoke(ses_event(new_message_id(), [STRANGER]))


# -- attachments --------------------------------------------------------------------


def test_nested_attachments_are_listed_and_download_byte_for_byte(mail: Mailroom):
    created, event = receive_one(mail, "nested_attachments.eml")
    assert event["data"]["text"].startswith("Hello,\n\nPlease find attached invoice 2026-031")
    assert event["data"]["attachments"] == [
        {"id": "att_1", "filename": "invoice-2026-031.pdf", "size": PDF_SIZE, "content_type": "application/pdf"},
        {"id": "att_2", "filename": "usage-2026-02.csv", "size": len(CSV), "content_type": "text/csv"},
    ]
    pdf = mail.download(created, event["id"], "att_1")
    assert pdf.status == 200
    assert pdf.headers["Content-Type"] == "application/pdf"
    assert pdf.headers["Content-Disposition"] == 'attachment; filename="invoice-2026-031.pdf"'
    assert pdf.headers["X-Content-Type-Options"] == "nosniff"
    assert len(pdf.content) == PDF_SIZE
    assert pdf.content.startswith(b"%PDF-1.4\n") and pdf.content.endswith(b"%%EOF\n")
    csv = mail.download(created, event["id"], "att_2")
    assert (csv.content, csv.headers["Content-Type"]) == (CSV, "text/csv; charset=utf-8")


@pytest.mark.parametrize(
    "maintype, subtype", [("application", "json"), ("application", "octet-stream"), ("image", "png")]
)
def test_attachment_bytes_pass_untouched_whatever_their_type(mail: Mailroom, maintype: str, subtype: str):
    created = mail.api.provision()
    payload = b'{"not": "utf-8 \xff\xfe"}' + bytes(range(256))
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "robot@example.com", email_of(created), "Data"
    message.set_content("Attached.")
    message.add_attachment(payload, maintype=maintype, subtype=subtype, filename=f"data.{subtype}")
    mail.receive(message.as_bytes(), [email_of(created)])
    [event] = mail.emails(created)
    download = mail.download(created, event["id"], "att_1")
    assert (download.status, download.content) == (200, payload)
    assert download.headers["Content-Type"] == f"{maintype}/{subtype}"


def test_an_attachment_over_ten_megabytes_is_refused_with_413(mail: Mailroom):
    created = mail.api.provision()
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "scanner@example.com", email_of(created), "Scan"
    message.set_content("The scan is attached.")
    message.add_attachment(bytes(12_000_000), maintype="application", subtype="zip", filename="scan.zip")
    mail.receive(message.as_bytes(), [email_of(created)])
    [event] = mail.emails(created)
    assert event["data"]["attachments"][0]["size"] == 12_000_000
    refused = mail.download(created, event["id"], "att_1")
    assert refused.status == 413
    assert refused.error_code == "payload_too_large"
    assert refused.json()["error"]["max_bytes"] == 10_000_000


def test_an_attachment_whose_message_is_gone_is_410(mail: Mailroom):
    created, event = receive_one(mail, "nested_attachments.eml")
    mail.s3.delete_object(Bucket=BUCKET, Key=PREFIX + event["data"]["message_id"])
    gone = mail.download(created, event["id"], "att_1")
    assert gone.status == 410
    assert gone.error_code == "attachment_unavailable"


def test_downloads_count_against_the_poll_rate(make_mailroom):
    mail = make_mailroom(poll_rate_per_minute=3)
    created, event = receive_one(mail, "nested_attachments.eml")  # one poll
    assert mail.download(created, event["id"], "att_1").status == 200
    assert mail.download(created, event["id"], "att_2").status == 200
    limited = mail.download(created, event["id"], "att_1")
    assert limited.status == 429
    assert limited.error_code == "rate_limited"
    assert "Retry-After" in limited.headers


def streamed_download(mail: Mailroom, created: dict, event_id: str, attachment_id: str, source_ip: str) -> dict:
    """A download as the streaming function answers it, from `source_ip`: the body is sent as it is drawn."""
    url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/attachments/{attachment_id}"
    mail.api.source_ip = source_ip
    request = mail.api.event("GET", url, token=created["credentials"]["read_token"])
    return mail.api.app.resolve(request, StreamingContext())


def test_a_download_being_sent_counts_among_its_clients_held_reads(make_mailroom):
    """A slow reader of a large attachment holds the streaming function as long as a stream does."""
    mail = make_mailroom(max_held_reads_per_client=2)
    created, event = receive_one(mail, "nested_attachments.eml")
    here, elsewhere = "203.0.113.7", "198.51.100.9"
    sending = [streamed_download(mail, created, event["id"], "att_1", here) for _ in range(2)]
    assert [answer["statusCode"] for answer in sending] == [200, 200]
    refused = streamed_download(mail, created, event["id"], "att_2", here)
    assert refused["statusCode"] == 429
    assert '"too_many_held_reads"' in refused["body"] and "downloads per client" in refused["body"]
    mail.api.source_ip = here
    stream = mail.api.app.resolve(stream_request(mail.api, created), StreamingContext())
    assert stream["statusCode"] == 429, "a stream from the same client is refused too"
    other = streamed_download(mail, created, event["id"], "att_2", elsewhere)
    assert b"".join(other["body"]) == CSV, "another client is not"

    drawn = b"".join(sending[0]["body"])
    assert len(drawn) == PDF_SIZE and drawn.startswith(b"%PDF-1.4\n")
    assert sending[0]["multiValueHeaders"]["Content-Disposition"] == ['attachment; filename="invoice-2026-031.pdf"']
    again = streamed_download(mail, created, event["id"], "att_2", here)
    assert again["statusCode"] == 200, "a body sent to its end gave its read back"
    for answer in (sending[1], again):
        answer["body"].close()  # the client left before any of it was sent
    for _ in range(2):
        assert streamed_download(mail, created, event["id"], "att_2", here)["statusCode"] == 200


def test_a_download_refused_for_held_reads_counts_a_poll_as_a_stream_does_and_a_refused_download_holds_nothing(
    make_mailroom,
):
    """The token is admitted (one poll) before the client's held read is asked for, as a stream's is."""
    mail = make_mailroom(max_held_reads_per_client=1, poll_rate_per_minute=5)
    created, event = receive_one(mail, "nested_attachments.eml")  # poll 1
    here = "203.0.113.7"
    sending = streamed_download(mail, created, event["id"], "att_1", here)  # poll 2
    assert sending["statusCode"] == 200
    refused = streamed_download(mail, created, event["id"], "att_2", here)  # poll 3
    assert refused["statusCode"] == 429 and '"too_many_held_reads"' in refused["body"]
    sending["body"].close()
    assert streamed_download(mail, created, event["id"], "att_9", here)["statusCode"] == 404  # poll 4
    again = streamed_download(mail, created, event["id"], "att_2", here)  # poll 5
    assert b"".join(again["body"]) == CSV, "the 404 gave its held read back"
    spent = streamed_download(mail, created, event["id"], "att_2", here)
    assert spent["statusCode"] == 429 and '"rate_limited"' in spent["body"]


def test_a_strangers_streamed_download_costs_one_refused_write_and_holds_nothing(make_mailroom):
    mail = make_mailroom(max_held_reads_per_client=1)
    created, event = receive_one(mail, "nested_attachments.eml")
    stranger = {**created, "credentials": {"read_token": "crt_wrong"}}
    calls = FaultInjector(mail.api.services.client)

    calls.arm()
    for _ in range(3):
        assert streamed_download(mail, stranger, event["id"], "att_1", "203.0.113.7")["statusCode"] == 401

    assert calls.calls == 3, "one DynamoDB call each: the admission the token fails"
    # The stranger's client took no held read: the owner, from the same network, downloads at once.
    sending = streamed_download(mail, created, event["id"], "att_2", "203.0.113.7")
    assert b"".join(sending["body"]) == CSV


def test_unknown_attachments_events_and_tokens_are_refused(mail: Mailroom):
    created, event = receive_one(mail, "nested_attachments.eml")
    mail.api.post_inbox(created, {"type": "build.done"})
    other = mail.api.poll(created).json()["events"][-1]
    assert mail.download(created, event["id"], "att_3").status == 404
    assert mail.download(created, other["id"], "att_1").status == 404
    assert mail.download(created, "evt_99_0000", "att_1").status == 404
    assert mail.download(created, "not-an-event", "att_1").status == 404
    stranger = {**created, "credentials": {"read_token": "crt_wrong"}}
    assert mail.download(stranger, event["id"], "att_1").status == 401


def test_an_inbox_event_posing_as_email_cannot_read_another_address_mail(mail: Mailroom):
    victim, victim_event = receive_one(mail, "nested_attachments.eml")
    attacker = mail.api.provision()
    forged = {"type": "email.received", "source": "email", "data": victim_event["data"]}
    assert mail.api.post_inbox(attacker, forged).status == 202
    [fake] = mail.emails(attacker)
    assert fake["ingress_surface"] == "http"
    refused = mail.download(attacker, fake["id"], "att_1")
    assert refused.status == 404
    assert mail.download(victim, victim_event["id"], "att_1").status == 200


# -- replay -------------------------------------------------------------------------


def test_replay_of_a_delivered_message_returns_the_original_event(mail: Mailroom):
    created, event = receive_one(mail, "plain.eml")
    again = mail.replay(created, {"message_id": event["data"]["message_id"]})
    assert again.status == 200
    assert again.json() == {"duplicate": True, "event": {"id": event["id"], "sequence": event["sequence"]}}
    assert len(mail.emails(created)) == 1


def test_replay_recovers_a_message_whose_delivery_was_lost(mail: Mailroom):
    created = mail.api.provision()
    message_id = mail.store(fixture_message("nested_attachments.eml", email_of(created)))
    recovered = mail.replay(created, {"email_id": message_id})  # the AgentAddress field name
    assert recovered.status == 201
    assert recovered.json()["duplicate"] is False
    [event] = mail.emails(created)
    assert (event["id"], event["ingress_surface"]) == (recovered.json()["event"]["id"], "email")
    assert event["data"]["verdicts"] == {"spf": None, "dkim": None, "dmarc": None, "spam": None, "virus": None}
    assert mail.download(created, event["id"], "att_2").content == CSV
    assert mail.replay(created, {"message_id": message_id}).status == 200


def test_a_blind_copy_is_recognised_by_the_received_header(mail: Mailroom):
    created = mail.api.provision()
    raw = (
        f"Received: from mx.example.org by inbound-smtp.us-east-1.amazonaws.com with SMTP id x1\r\n"
        f" for {email_of(created)}; Tue, 10 Mar 2026 14:20:00 +0000\r\n"
        "To: undisclosed-recipients:;\r\nFrom: boss@example.org\r\nSubject: Bcc\r\n\r\nQuietly.\r\n"
    ).encode()
    assert mail.replay(created, {"message_id": mail.store(raw)}).status == 201


def test_replay_only_reaches_messages_delivered_to_the_address(mail: Mailroom):
    recipient, other = mail.api.provision(), mail.api.provision()
    message_id = mail.store(fixture_message("plain.eml", email_of(recipient)))
    not_theirs = mail.replay(other, {"message_id": message_id})
    assert (not_theirs.status, not_theirs.error_code) == (404, "not_found")
    assert mail.replay(other, {"message_id": new_message_id()}).status == 404
    assert mail.emails(other) == []
    for bad in ("../../etc/passwd", "", "x" * 201):
        assert mail.replay(recipient, {"message_id": bad}).error_code == "invalid_request"
    wrong_token = {**recipient, "credentials": {"read_token": "crt_wrong"}}
    assert mail.replay(wrong_token, {"message_id": message_id}).status == 401


def test_the_email_routes_are_documented(mail: Mailroom):
    paths = mail.api.request("GET", "/openapi.json").json()["paths"]
    assert "/api/v1/addresses/{address_id}/events/{event_id}/attachments/{attachment_id}" in paths
    assert "/api/v1/addresses/{address_id}/email/replay" in paths
    assert "email" in mail.api.request("GET", "/.well-known/agentaddress.json").json()["capabilities"]


def _nested_multipart(depth: int, address: str) -> bytes:
    body = "Content-Type: text/plain\r\n\r\nthe innermost words\r\n"
    for level in range(depth):
        body = f'Content-Type: multipart/mixed; boundary="b{level}"\r\n\r\n--b{level}\r\n{body}--b{level}--\r\n'
    head = f"From: deep@example.com\r\nTo: {address}\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
    return (head + body).encode()


def test_parts_nested_a_thousand_levels_deep_make_an_event_that_says_so(mail: Mailroom):
    """68 KB of nesting once raised RecursionError: ingest failed, was retried, and landed in the failed queue."""
    created = mail.api.provision()
    address = email_of(created)
    message_id = mail.receive(_nested_multipart(1_000, address), [address])
    [event] = mail.emails(created)
    data = event["data"]
    assert (data["from"], data["subject"], data["to"]) == ("deep@example.com", "deep", [address])
    assert data["truncated"] is True and data["truncated_fields"] == ["parts"]
    assert data["text"] is None and data["attachments"] == []
    assert mail.download(created, event["id"], "att_1").status == 404
    replayed = mail.replay(created, {"message_id": message_id})
    assert replayed.status == 200 and replayed.json()["duplicate"] is True


def test_nesting_past_the_walk_bound_keeps_what_lies_within_it(mail: Mailroom):
    created = mail.api.provision()
    address = email_of(created)
    mail.receive(_nested_multipart(40, address), [address])
    [event] = mail.emails(created)
    assert event["data"]["truncated_fields"] == ["parts"]
    mail.receive(_nested_multipart(20, address), [address])
    whole = mail.emails(created)[1]["data"]
    assert (whole["text"], whole["truncated"]) == ("the innermost words", False)


def test_huge_headers_are_cut_to_sane_sizes_and_flagged(mail: Mailroom):
    """A 0.8 MB Cc of 40,000 addresses once took 17 s to parse; a folded 2.4 MB subject made answers too big."""
    created = mail.api.provision()
    address = email_of(created)
    cc = ", ".join(f"person{n}@example.com" for n in range(40_000))
    subject = "\r\n ".join(["é" * 60] * 20_000)
    references = " ".join(f"<{n}@thread.example>" for n in range(500))
    raw = (
        f"From: crowd@example.com\r\nTo: {address}\r\nCc: {cc}\r\nSubject: =?utf-8?q?big?= {subject}\r\n"
        f"References: {references}\r\n\r\nhello\r\n"
    ).encode()
    mail.receive(raw, [address])
    [event] = mail.emails(created)
    data = event["data"]
    assert data["cc"][:2] == ["person0@example.com", "person1@example.com"] and len(data["cc"]) == 100
    assert data["subject"].startswith("big éé") and len(data["subject"]) == 2_000
    assert len(data["references"]) == 100 and data["references"][0] == "<0@thread.example>"
    assert data["truncated_fields"] == ["cc", "references", "subject"]
    assert data["text"] == "hello\n"


def test_mail_past_an_address_rate_is_dropped_until_the_next_minute(make_mailroom, clock):
    mail = make_mailroom(email_rate_per_minute=2)
    created, other = mail.api.provision(), mail.api.provision()
    for fixture in ("plain.eml", "alternative.eml", "html_only.eml"):
        mail.receive(fixture_message(fixture, email_of(created)), [email_of(created), email_of(other)])
    assert len(mail.emails(created)) == len(mail.emails(other)) == 2
    clock.advance(60)
    mail.receive(fixture_message("html_only.eml", email_of(created)), [email_of(created)])
    assert len(mail.emails(created)) == 3


def stored(mail: Mailroom, message_id: str) -> bool:
    return "Contents" in mail.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX + message_id)


def delete_address(mail: Mailroom, created: dict) -> int:
    url = path_of(created["endpoints"]["address_url"])
    return mail.api.request("DELETE", url, token=created["credentials"]["read_token"]).status


def test_mail_for_no_live_address_is_not_kept(mail: Mailroom):
    deleted = mail.api.provision()
    assert delete_address(mail, deleted) == 200
    for recipients in ([NOBODY], [STRANGER], [email_of(deleted), NOBODY]):
        message_id = mail.receive(fixture_message("plain.eml", recipients[0]), recipients)
        assert not stored(mail, message_id), recipients
        # A redelivery finds nobody to keep it for: no error, no retry loop.
        mail.invoke(ses_event(message_id, recipients))


def test_mail_for_a_full_feed_is_kept_for_replay(make_mailroom):
    mail = make_mailroom(max_events=1, owner_reserved_events=0)
    created = mail.api.provision()
    mail.receive(fixture_message("plain.eml", email_of(created)), [email_of(created)])
    refused = mail.receive(fixture_message("alternative.eml", email_of(created)), [email_of(created)])
    assert stored(mail, refused)


def test_deleting_an_address_deletes_its_stored_mail_unless_another_named_address_holds_it(mail: Mailroom):
    alone, first, second = mail.api.provision(), mail.api.provision(), mail.api.provision()
    own = mail.receive(fixture_message("plain.eml", email_of(alone)), [email_of(alone)])
    recipients = [email_of(first), email_of(second)]
    shared = mail.receive(fixture_message("two_recipients.eml", *recipients), recipients)
    assert stored(mail, own) and stored(mail, shared)
    assert delete_address(mail, alone) == 200
    assert not stored(mail, own)
    assert delete_address(mail, first) == 200
    assert stored(mail, shared), "the second address still holds it"
    assert mail.replay(second, {"message_id": shared}).status == 200
    assert delete_address(mail, second) == 200
    assert not stored(mail, shared)


def test_mail_stops_short_of_the_owners_reserve(make_mailroom):
    mail = make_mailroom(max_events=3, owner_reserved_events=1)
    created = mail.api.provision()
    for fixture in ("plain.eml", "alternative.eml", "html_only.eml"):
        mail.receive(fixture_message(fixture, email_of(created)), [email_of(created)])
    assert len(mail.emails(created)) == 2
    url = f"{path_of(created['endpoints']['state_url'])}/seen"
    token = created["credentials"]["read_token"]
    assert mail.api.request("PUT", url, json_body={"value": 2}, token=token).status == 201


# -- hostile structure: every mail makes an event, at a cost bounded by what it holds ----------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain; x*1*", "=?utf-7?q?+2AA-?=", "text/plain" + ";" * 80_000],
    ids=["continuation-without-value", "lone-surrogate-word", "eighty-thousand-semicolons"],
)
def test_a_content_type_the_header_parser_chokes_on_still_makes_an_event(mail: Mailroom, content_type: str):
    """The first two raised from inside the standard library's header parser on every retry; the third
    took minutes, its parser being quadratic in the defects it finds."""
    created = mail.api.provision()
    to = email_of(created)
    raw = f"From: a@elsewhere.example\r\nTo: {to}\r\nContent-Type: {content_type}\r\n\r\nstill read\r\n".encode()
    message_id = mail.receive(raw, [to])
    [event] = mail.emails(created)
    assert event["data"]["message_id"] == message_id
    assert mail.replay(created, {"message_id": message_id}).json()["event"]["id"] == event["id"]


def test_headers_are_parsed_within_their_bound_however_often_they_repeat(mail: Mailroom, monkeypatch):
    """Sixty To headers of 16,000 commas took 54 s: each was parsed, though a hundred addresses are kept."""
    parsed: list[int] = []
    header_fetch_parse = EmailPolicy.header_fetch_parse

    def counting(self: EmailPolicy, name: str, value: str) -> object:
        parsed.append(len(value))
        return header_fetch_parse(self, name, value)

    monkeypatch.setattr(EmailPolicy, "header_fetch_parse", counting)
    created = mail.api.provision()
    to = email_of(created)
    crowd = "".join(f"To: {',' * 16_000}\r\n" for _ in range(60))
    raw = f"From: a@elsewhere.example\r\n{crowd}To: {to}\r\nContent-Type: text/plain{';' * 80_000}\r\n\r\nhi\r\n"
    mail.receive(raw.encode(), [to])
    [event] = mail.emails(created)
    assert "to" in event["data"]["truncated_fields"]
    assert sum(parsed) < 20 * mime.MAX_HEADER_CHARS, "read in full, these headers hold about 70 times that"


def test_an_event_of_text_that_escapes_large_fits_one_answer_and_says_what_was_left_out(make_mailroom):
    """Bodies within their own bound, of control characters (seven bytes each once answered), once made an
    event of 6.9 MB: refused by DynamoDB's transaction, or a feed whose first page could never be answered."""
    mail = make_mailroom()
    created = mail.api.provision()
    to = email_of(created)
    control = "\x01" * 200_000
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@elsewhere.example", to, "control"
    message.set_content(control)
    message.add_alternative(f"<p>{control}</p>", subtype="html")
    mail.receive(message.as_bytes(), [to])
    [event] = mail.emails(created)
    data = event["data"]
    assert jsontext.value_sent_size(data) <= mime.MAX_EVENT_BYTES
    assert (data["html"], data["text"]) == (None, control + "\n")
    assert data["truncated_fields"] == ["html"]


def test_an_attached_message_with_a_long_address_list_downloads_whole(mail: Mailroom):
    """Its headers are written out as they came: refolding them took time quadratic in a long address list."""
    created = mail.api.provision()
    to = email_of(created)
    crowd = ",\r\n ".join(f"person{n}@example.com" for n in range(2_000))
    inner = f"From: b@elsewhere.example\r\nTo: {crowd}\r\nSubject: inner\r\n\r\nhi\r\n"
    outer = (
        f"From: a@elsewhere.example\r\nTo: {to}\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n"
        f"--B\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
        f"--B\r\nContent-Type: message/rfc822\r\n\r\n{inner}--B--\r\n"
    )
    mail.receive(outer.encode(), [to])
    [event] = mail.emails(created)
    [listed] = event["data"]["attachments"]
    downloaded = mail.download(created, event["id"], listed["id"]).content
    assert len(downloaded) == listed["size"]
    attached = BytesParser(policy=policy.default).parsebytes(downloaded)
    assert [address.addr_spec for address in attached["To"].addresses] == [
        f"person{n}@example.com" for n in range(2_000)
    ]
    assert (attached["Subject"], attached.get_content()) == ("inner", "hi")


def test_a_punycode_body_is_read_as_utf8(mail: Mailroom):
    """Python's punycode decoder takes time quadratic in the body: a 1 MB body took 33 s."""
    created = mail.api.provision()
    to = email_of(created)
    raw = f"To: {to}\r\nContent-Type: text/plain; charset=punycode\r\n\r\nx-baba\r\n".encode()
    mail.receive(raw, [to])
    [event] = mail.emails(created)
    assert event["data"]["text"] == "x-baba\n"


@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_headers_alone_are_read_from_the_header_block_without_the_body(newline: bytes):
    """An address's deletion reads every stored message's recipients: reading the body too (the parser's own
    `headersonly` does) took seconds for a message of 30 MiB of empty lines."""
    received = b"Received: from x by cairn.test for <addr_b@cairn.test>; Sun, 6 Dec 2026 14:00:00 +0000"
    head = newline.join([b"To: Ada <addr_a@cairn.test>", received])
    body = newline * 1_000 + b"To: addr_c@cairn.test" + newline
    message = mime.parse_headers(head + newline * 2 + body)
    assert mime.recipients_named(message) == {"addr_a@cairn.test", "addr_b@cairn.test"}
    assert message.get_payload() in ("", None)


def stack_depth() -> int:
    """Frames on the stack now: the test leaves the parser the same room under pytest alone or its workers."""
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_how_a_message_parses_does_not_depend_on_the_callers_stack():
    """A message nested deeper than containers allow parsed at ingest (a shallow stack) and not at download (a
    deeper one): its attachment was listed, then answered 410 as no longer stored."""
    raw = _nested_multipart(250, "a@cairn.test")

    def parsed_under(frames: int):
        return mime.parse(raw) if frames == 0 else parsed_under(frames - 1)

    shallow, deep = mime.parse(raw), parsed_under(sys.getrecursionlimit() - stack_depth() - 150)
    assert not shallow.is_multipart() and not deep.is_multipart()
    assert [type(found).__name__ for found in deep.defects] == [type(found).__name__ for found in shallow.defects]
    assert mime.parse(_nested_multipart(mime.MAX_CONTAINERS - 1, "a@cairn.test")).is_multipart()


def test_a_message_of_more_lines_than_the_parser_may_hold_is_read_for_its_headers():
    """The parser keeps every line: 30 MiB of empty lines took 1.3 GB and a minute."""
    raw = b"Subject: lines\r\nContent-Type: text/plain\r\n\r\n" + b"\r\n" * 1_000_001
    message = mime.parse(raw)
    assert message["Subject"] == "lines" and message.get_payload() in ("", None)
    assert any(type(found).__name__ == "StructureTooDeep" for found in message.defects)
