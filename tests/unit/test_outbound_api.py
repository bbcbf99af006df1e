"""Outbound email through the Lambda resolver on moto: contacts, codes, sends and their refusals."""

from __future__ import annotations

import base64
import re
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest

from cairn.dynamodb.raw_messages import raw_message_store
from cairn.email.ingest import Delivery
from cairn.email.outbound_ports import ComposedMessage, Handoff, MailerError
from cairn.email.sending import RECOVERY_SECONDS
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, path_of

PERSON = "ada@example.org"


class RecordingMailer:
    """Keeps what it was handed; refuses when told to."""

    def __init__(self) -> None:
        self.sent: list[ComposedMessage] = []
        self.refuse: MailerError | None = None

    def send(self, message: ComposedMessage) -> Handoff:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append(message)
        return Handoff(provider_message_id=f"local-{len(self.sent)}", outcome="delivered")


class Outbound:
    """One address and the outbound routes it speaks."""

    def __init__(self, api: LambdaClient, mailer: RecordingMailer) -> None:
        self.api = api
        self.mailer = mailer
        self.created = api.provision(name="invoice approval")
        self.root = path_of(self.created["endpoints"]["address_url"])
        self.token = self.created["credentials"]["read_token"]

    def contacts(self):
        return self.api.request("GET", f"{self.root}/email/contacts", token=self.token)

    def contact(self, email: str, code: str | None = None):
        body = {"email": email} if code is None else {"email": email, "code": code}
        return self.api.request("POST", f"{self.root}/email/contacts", json_body=body, token=self.token)

    def remove(self, email: str):
        return self.api.request("DELETE", f"{self.root}/email/contacts/{email}", token=self.token)

    def send(self, body: dict, key: str | None = "k1"):
        headers = {} if key is None else {"Idempotency-Key": key}
        return self.api.request("POST", f"{self.root}/email/send", json_body=body, headers=headers, token=self.token)

    def last_code(self) -> str:
        text = parsed(self.mailer.sent[-1]).get_content()
        return re.search(r"code is: (\d{6})", text).group(1)

    def verified(self, email: str = PERSON) -> None:
        assert self.contact(email).status == 202
        assert self.contact(email, self.last_code()).status == 200

    def events(self) -> list[dict]:
        return self.api.poll(self.created, limit=1000).json()["events"]

    def receive(self, raw: bytes, message_id: str = "m1") -> dict:
        raw_message_store(self.api.services.settings).save(message_id, raw)
        self.api.services.email.ingest(Delivery(message_id=message_id, recipients=[self.created["address"]["email"]]))
        return self.events()[-1]


def parsed(message: ComposedMessage):
    return BytesParser(policy=policy.default).parsebytes(message.raw)


@pytest.fixture
def mailer() -> RecordingMailer:
    return RecordingMailer()


@pytest.fixture
def out(moto_env, clock: FakeClock, mailer: RecordingMailer, tmp_path: Path) -> Outbound:
    api = LambdaClient.on_moto(clock, mailer=mailer, email_blob_dir=tmp_path / "email", outbound_max_sends_per_day=3)
    return Outbound(api, mailer)


def message(**fields) -> dict:
    return {"to": PERSON, "subject": "Approve invoice 42?", "text": "Reply YES or NO.", **fields}


# -- contacts --------------------------------------------------------------------


def test_a_code_is_mailed_from_the_address_and_never_returned(out: Outbound):
    reply = out.contact("Ada@Example.org")
    assert reply.status == 202
    assert reply.json()["contact"]["status"] == "pending" and reply.json()["status"] == "pending"
    [mail] = out.mailer.sent
    assert mail.sender == out.created["address"]["email"] and mail.recipient == PERSON
    body = parsed(mail).get_content()
    assert "invoice approval" in body and "ignore it" in body
    assert out.last_code() not in reply.text
    listing = out.contacts().json()
    assert listing["outbound_configured"] is True
    assert [(c["email"], c["status"]) for c in listing["contacts"]] == [(PERSON, "pending")]


def test_the_right_code_verifies_and_a_wrong_one_says_how_many_tries_are_left(out: Outbound):
    out.contact(PERSON)
    wrong = out.contact(PERSON, "000000" if out.last_code() != "000000" else "111111")
    assert (wrong.status, wrong.error_code, wrong.json()["error"]["attempts_left"]) == (400, "wrong_code", 4)
    right = out.contact(PERSON, out.last_code())
    assert right.status == 200 and right.json()["contact"]["status"] == "verified"
    assert right.json()["contact"]["verified_at"]
    # Asking again for a verified contact mails nothing.
    assert out.contact(PERSON).status == 200 and len(out.mailer.sent) == 1


def test_five_attempts_then_only_a_new_code_helps(out: Outbound, clock: FakeClock):
    out.contact(PERSON)
    code = out.last_code()
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(5):
        assert out.contact(PERSON, wrong).error_code == "wrong_code"
    refused = out.contact(PERSON, code)
    assert (refused.status, refused.error_code) == (409, "too_many_attempts")
    too_soon = out.contact(PERSON)
    assert too_soon.status == 429 and int(too_soon.headers["Retry-After"]) >= 1
    clock.advance(61)
    assert out.contact(PERSON).status == 202
    assert out.contact(PERSON, code if code != out.last_code() else wrong).error_code == "wrong_code"
    assert out.contact(PERSON, out.last_code()).status == 200


def test_a_code_expires_after_fifteen_minutes(out: Outbound, clock: FakeClock):
    out.contact(PERSON)
    clock.advance(15 * 60 + 1)
    assert out.contact(PERSON, out.last_code()).error_code == "code_expired"


def test_at_most_ten_contacts_and_removal_frees_a_place(out: Outbound):
    for index in range(10):
        assert out.contact(f"p{index}@example.org").status == 202
    full = out.contact("eleventh@example.org")
    assert (full.status, full.error_code) == (409, "contact_limit_reached")
    assert len(out.mailer.sent) == 10
    assert out.remove("p3@example.org").status == 200
    assert out.remove("p3@example.org").error_code == "not_found"
    assert out.contact("eleventh@example.org").status == 202


def test_verification_mails_have_their_own_daily_limit(moto_env, clock: FakeClock, mailer: RecordingMailer):
    out = Outbound(LambdaClient.on_moto(clock, mailer=mailer, outbound_verifications_per_day=2), mailer)
    assert out.contact("a@example.org").status == 202
    assert out.contact("b@example.org").status == 202
    refused = out.contact("c@example.org")
    assert refused.status == 429 and refused.error_code == "rate_limited"
    assert len(mailer.sent) == 2


@pytest.mark.parametrize(
    ("email", "code"),
    [
        ("ada@example.org\r\nBcc: eve@example.org", "header_injection"),
        ("not an address", "invalid_request"),
        # Encoded words (RFC 2047 §5: never in an address): the first decodes to a line break, the second to
        # another address than the one mailed.
        ("=?us-ascii?q?a=0d=0a?=@example.com", "invalid_request"),
        ("=?utf-8?q?x?=@example.com", "invalid_request"),
    ],
)
def test_a_bad_contact_address_is_refused_and_nothing_is_mailed(out: Outbound, email: str, code: str):
    assert out.contact(email).error_code == code
    assert out.mailer.sent == [] and out.contacts().json()["contacts"] == []


def test_a_code_the_carrier_refuses_for_good_is_a_422_and_one_it_could_not_take_a_503_for_a_minute(out: Outbound):
    out.mailer.refuse = MailerError("relay refused the recipient: nobody@example.org (550)", permanent=True)
    refused = out.contact("nobody@example.org")
    assert (refused.status, refused.error_code) == (422, "mail_refused")
    assert "550" in refused.json()["error"]["message"] and "Retry-After" not in refused.headers
    out.mailer.refuse = MailerError("relay answered 451", permanent=False)
    later = out.contact("ada@example.org")
    assert (later.status, later.error_code, later.headers["Retry-After"]) == (503, "temporarily_unavailable", "60")
    out.mailer.refuse = None
    assert out.contact("ada@example.org").status == 429  # within the minute, as Retry-After said


def test_contacts_need_the_read_token(out: Outbound):
    reply = out.api.request("GET", f"{out.root}/email/contacts", token="crt_wrong")
    assert reply.status == 401


# -- sending ---------------------------------------------------------------------


def test_a_send_appends_sent_then_delivered_and_carries_the_address_as_sender(out: Outbound):
    out.verified()
    reply = out.send(message())
    assert reply.status == 202
    body = reply.json()
    assert body["status"] == "accepted" and body["duplicate"] is False
    sent = parsed(out.mailer.sent[-1])
    assert sent["From"] == out.created["address"]["email"] and sent["To"] == PERSON
    assert sent["Message-ID"] == body["message_id"] and sent.get_content_type() == "text/plain"
    assert sent.get_content().strip() == "Reply YES or NO."
    kinds = [(e["type"], e["ingress_surface"]) for e in out.events()]
    assert kinds == [("email.sent", "outbound"), ("email.delivered", "outbound")]
    sent_event, delivered = out.events()
    assert sent_event["id"] == body["event"]["id"] and sent_event["data"]["message_id"] == body["message_id"]
    assert delivered["data"]["send_event_id"] == sent_event["id"]


def test_the_same_key_and_message_answer_the_original_without_sending_again(out: Outbound):
    out.verified()
    first = out.send(message())
    again = out.send(message())
    assert again.status == 200 and again.json()["duplicate"] is True
    assert again.json()["message_id"] == first.json()["message_id"]
    assert again.json()["event"] == first.json()["event"]
    other = out.send(message(text="Something else."))
    assert (other.status, other.error_code) == (422, "idempotency_key_reused")
    assert len(out.mailer.sent) == 2  # the code and one message
    assert len(out.events()) == 2


def test_a_retry_after_the_recipient_was_removed_answers_the_send_it_made(out: Outbound):
    """A client retrying a send whose answer it lost was told the mail never went: re-added under a new key,
    the person would have had it twice."""
    out.verified()
    first = out.send(message())
    assert out.remove(PERSON).status == 200

    again = out.send(message())

    assert again.status == 200 and again.json()["duplicate"] is True
    assert again.json()["event"] == first.json()["event"]
    other = out.send(message(text="Something else."))
    assert (other.status, other.error_code) == (422, "idempotency_key_reused")
    unknown = out.send(message(), key="k2")
    assert (unknown.status, unknown.error_code) == (422, "unknown_recipient")
    assert len(out.mailer.sent) == 2  # the code and one message


def test_a_reply_threads_on_the_received_mail(out: Outbound):
    out.verified()
    raw = (
        f"From: {PERSON}\r\nTo: {out.created['address']['email']}\r\nSubject: Invoice 42\r\n"
        "Message-ID: <q1@example.org>\r\nReferences: <q0@example.org>\r\n\r\nShould I pay it?\r\n"
    ).encode()
    received = out.receive(raw)
    reply = out.send({"to": PERSON, "text": "Paid.", "reply_to_event_id": received["id"]})
    assert reply.status == 202, reply.text
    sent = parsed(out.mailer.sent[-1])
    assert sent["Subject"] == "Re: Invoice 42"
    assert sent["In-Reply-To"] == "<q1@example.org>"
    assert sent["References"] == "<q0@example.org> <q1@example.org>"
    data = out.events()[-2]["data"]
    assert data["in_reply_to"] == sent["In-Reply-To"]
    # What the sent mail's References header carries, in its order.
    assert data["references"] == sent["References"].split()


@pytest.mark.parametrize("subject", ["=?utf-8?q?=0D=0ABcc:_eve@example.org?=", "=?utf-16?B?9cb8?="])
def test_a_reply_to_a_subject_that_reads_as_an_encoded_word_keeps_it_as_text(out: Outbound, subject: str):
    """A stranger's mail chose the subject: decoded on the way out, it added a Bcc or failed every reply."""
    out.verified()
    encoded = "=?utf-8?b?" + base64.b64encode(subject.encode()).decode() + "?="  # the subject the feed shows
    raw = f"From: {PERSON}\r\nTo: {out.created['address']['email']}\r\nSubject: {encoded}\r\n\r\nHi\r\n"
    received = out.receive(raw.encode())
    assert received["data"]["subject"] == subject
    reply = out.send({"to": PERSON, "text": "Noted.", "reply_to_event_id": received["id"]})
    assert reply.status == 202, reply.text
    sent = parsed(out.mailer.sent[-1])
    assert sent["Subject"] == "Re: " + subject.replace("=?", "= ?")
    assert sent["Bcc"] is None and sent["To"] == PERSON


def test_a_reply_to_mail_without_a_usable_message_id_records_no_thread_headers(out: Outbound):
    out.verified()
    raw = f"From: {PERSON}\r\nTo: {out.created['address']['email']}\r\nSubject: Hi\r\n\r\nNo id here.\r\n".encode()
    received = out.receive(raw)
    assert out.send({"to": PERSON, "text": "Noted.", "reply_to_event_id": received["id"]}).status == 202
    sent = parsed(out.mailer.sent[-1])
    assert sent["References"] is None and sent["In-Reply-To"] is None
    data = out.events()[-2]["data"]
    assert (data["in_reply_to"], data["references"]) == (None, [])


def test_a_reply_to_anything_but_received_mail_is_refused(out: Outbound):
    out.verified()
    posted = out.api.post_inbox(out.created, {"type": "email.received", "source": "email", "data": {}})
    for event_id in (posted.json()["event"]["id"], "evt_999_abcdef12", "nonsense"):
        reply = out.send(message(reply_to_event_id=event_id), key=f"k-{event_id}")
        assert (reply.status, reply.error_code) == (422, "invalid_reply_to_event")
    assert len(out.mailer.sent) == 1 and [e["ingress_surface"] for e in out.events()] == ["http"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (message(to="nobody@example.org"), 422, "unknown_recipient"),
        (message(to=[PERSON, "b@example.org"]), 400, "too_many_recipients"),
        (message(cc="b@example.org"), 400, "too_many_recipients"),
        (message(to="ada@example.org, b@example.org"), 400, "too_many_recipients"),
        (message(subject="Hi\r\nBcc: eve@example.org"), 400, "header_injection"),
        (message(to="ada@example.org\nBcc: eve@example.org"), 400, "header_injection"),
        # Encoded words, decoded on the way out: to a header line (before Python 3.11.10), or to UTF-16 no
        # header can carry (an error).
        (message(subject="Hi=?utf-8?q?=0D=0ABcc:_eve@example.org?="), 400, "header_injection"),
        (message(subject="=?utf-16?B?9cb8?="), 400, "header_injection"),
        (message(html="<b>hi</b>"), 400, "plain_text_only"),
        (message(attachments=[{"filename": "a.txt"}]), 400, "plain_text_only"),
        (message(text="x" * 10_001), 413, "payload_too_large"),
        (message(reply_to_event_id="evt_1_00000000"), 422, "invalid_reply_to_event"),
    ],
)
def test_bad_sends_are_refused_and_nothing_is_sent_or_appended(out: Outbound, body: dict, status: int, code: str):
    out.verified()
    reply = out.send(body)
    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert len(out.mailer.sent) == 1 and out.events() == []


def test_a_pending_contact_cannot_be_mailed_and_a_key_is_required(out: Outbound):
    out.contact(PERSON)
    assert out.send(message()).error_code == "recipient_not_verified"
    out.verified("bob@example.org")
    missing = out.send(message(to="bob@example.org"), key=None)
    assert (missing.status, missing.error_code) == (400, "invalid_request")
    assert out.events() == []


def test_sends_per_day_are_limited_until_the_next_utc_day(out: Outbound, clock: FakeClock):
    out.verified()
    for index in range(3):
        assert out.send(message(), key=f"day-{index}").status == 202
    refused = out.send(message(), key="day-3")
    assert refused.status == 429 and refused.error_code == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 86_400
    assert len(out.events()) == 6
    clock.advance(int(refused.headers["Retry-After"]) + 1)
    assert out.send(message(), key="day-3").status == 202


class LaterOutcomes(RecordingMailer):
    """A carrier that reports outcomes later, as SES does."""

    def send(self, message: ComposedMessage) -> Handoff:
        self.sent.append(message)
        return Handoff(provider_message_id=f"ses-{len(self.sent)}")


def test_each_send_holds_a_slot_for_its_outcome_and_a_full_feed_sends_nothing(moto_env, clock: FakeClock):
    mailer = LaterOutcomes()
    # No owner reserve: the arithmetic below is about outcome slots alone.
    out = Outbound(LambdaClient.on_moto(clock, mailer=mailer, max_events=4, owner_reserved_events=0), mailer)
    out.verified()
    assert out.send(message(), key="a").status == 202
    assert out.send(message(), key="b").status == 202
    # Two sent events and two reserved outcome slots fill the feed of four.
    refused = out.send(message(), key="c")
    assert (refused.status, refused.error_code) == (409, "quota_exceeded")
    assert len(mailer.sent) == 3 and len(out.events()) == 2
    inbox = out.api.post_inbox(out.created, {"hello": 1})
    assert inbox.error_code == "quota_exceeded"
    first, second = out.events()
    sending = out.api.services.sending
    assert sending.record_outcome(out.created["address"]["id"], first["id"], "bounced", message_id=None)
    # A second report of the same send is a duplicate: one outcome per send.
    again = sending.record_outcome(out.created["address"]["id"], first["id"], "delivered", message_id=None)
    assert again is not None and again.duplicate
    assert [e["type"] for e in out.events()] == ["email.sent", "email.sent", "email.bounced"]


def test_a_carrier_refusal_is_recorded_as_failed(out: Outbound):
    out.verified()
    out.mailer.refuse = MailerError("relay answered 550", permanent=True)
    reply = out.send(message())
    assert reply.status == 202 and reply.json()["status"] == "failed"
    assert [e["type"] for e in out.events()] == ["email.sent", "email.failed"]
    assert out.events()[1]["data"]["detail"] == "relay answered 550"


def test_a_refused_send_retried_with_the_same_key_is_handed_over_again_once(out: Outbound):
    out.verified()
    out.mailer.refuse = MailerError("relay answered 451", permanent=False)
    first = out.send(message())
    assert first.json()["status"] == "failed"
    out.mailer.refuse = None
    retried = out.send(message())
    assert (retried.status, retried.json()["status"], retried.json()["duplicate"]) == (200, "accepted", True)
    assert retried.json()["event"] == first.json()["event"]
    mailed = parsed(out.mailer.sent[-1])
    assert len(out.mailer.sent) == 2  # the code, then the message once
    assert mailed["Message-ID"] == first.json()["message_id"] and mailed.get_content().strip() == "Reply YES or NO."
    # Once handed over, further retries mail nothing.
    assert out.send(message()).json()["status"] == "accepted"
    assert len(out.mailer.sent) == 2
    events = out.events()
    assert [(e["type"], e["data"].get("attempt")) for e in events] == [
        ("email.sent", None),
        ("email.failed", 1),
        ("email.delivered", 2),
    ]
    assert {e["data"]["send_event_id"] for e in events[1:]} == {first.json()["event"]["id"]}


def test_each_retry_of_a_refused_send_is_one_more_attempt_with_its_own_outcome(out: Outbound):
    out.verified()
    out.mailer.refuse = MailerError("relay answered 550", permanent=True)
    assert [out.send(message()).json()["status"] for _ in range(3)] == ["failed"] * 3
    assert [(e["type"], e["data"].get("attempt")) for e in out.events()] == [
        ("email.sent", None),
        ("email.failed", 1),
        ("email.failed", 2),
        ("email.failed", 3),
    ]
    assert len(out.mailer.sent) == 1  # the code only


def test_a_refused_send_is_not_tried_again_a_day_later(out: Outbound, clock: FakeClock):
    out.verified()
    out.mailer.refuse = MailerError("relay answered 451", permanent=False)
    out.send(message())
    out.mailer.refuse = None
    clock.advance(RECOVERY_SECONDS + 1)
    late = out.send(message())
    assert (late.status, late.json()["status"]) == (200, "accepted")
    assert len(out.mailer.sent) == 1
    assert [e["type"] for e in out.events()] == ["email.sent", "email.failed"]


def test_a_retry_of_a_refused_send_needs_a_free_slot_for_its_outcome(moto_env, clock: FakeClock):
    mailer = RecordingMailer()
    out = Outbound(LambdaClient.on_moto(clock, mailer=mailer, max_events=3, owner_reserved_events=0), mailer)
    out.verified()
    mailer.refuse = MailerError("relay answered 451", permanent=False)
    out.send(message())
    assert out.api.post_inbox(out.created, {"fills": "the feed"}).status == 202
    mailer.refuse = None
    refused = out.send(message())
    assert (refused.status, refused.error_code) == (409, "quota_exceeded")
    assert len(mailer.sent) == 1 and len(out.events()) == 3


def test_an_operator_sender_sends_from_itself_with_replies_to_the_address(moto_env, clock: FakeClock):
    mailer = RecordingMailer()
    api = LambdaClient.on_moto(clock, mailer=mailer, outbound_from="agents@mail.example.com")
    out = Outbound(api, mailer)
    own = out.created["address"]["email"]
    out.verified()
    code_mail = parsed(mailer.sent[-1])
    assert (code_mail["From"], code_mail["Reply-To"]) == ("agents@mail.example.com", own)
    reply = out.send(message())
    sent = parsed(mailer.sent[-1])
    assert (sent["From"], sent["Reply-To"], sent["To"]) == ("agents@mail.example.com", own, PERSON)
    assert mailer.sent[-1].sender == "agents@mail.example.com"
    data = out.events()[0]["data"]
    assert (data["from"], data["reply_to"]) == ("agents@mail.example.com", own)
    # A refused hand-off tried again goes out as it was recorded.
    mailer.refuse = MailerError("relay answered 451", permanent=False)
    assert out.send(message(), key="k2").json()["status"] == "failed"
    mailer.refuse = None
    assert out.send(message(), key="k2").json()["status"] == "accepted"
    again = parsed(mailer.sent[-1])
    assert (again["From"], again["Reply-To"]) == ("agents@mail.example.com", own)
    assert reply.json()["message_id"] != again["Message-ID"]


def test_without_an_operator_sender_mail_has_no_reply_to(out: Outbound):
    out.verified()
    out.send(message())
    assert parsed(out.mailer.sent[-1])["Reply-To"] is None
    assert out.events()[0]["data"]["reply_to"] is None


def test_without_a_mailer_the_routes_say_outbound_is_not_configured(moto_api: LambdaClient):
    created = moto_api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    listing = moto_api.request("GET", f"{root}/email/contacts", token=token)
    assert listing.json() == {"contacts": [], "outbound_configured": False}
    added = moto_api.request("POST", f"{root}/email/contacts", json_body={"email": PERSON}, token=token)
    assert (added.status, added.error_code) == (409, "outbound_not_configured")
    sent = moto_api.request(
        "POST", f"{root}/email/send", json_body=message(), headers={"Idempotency-Key": "k"}, token=token
    )
    assert (sent.status, sent.error_code) == (409, "outbound_not_configured")


def test_discovery_says_whether_this_server_sends_mail(out: Outbound, moto_api: LambdaClient):
    sending = out.api.request("GET", "/.well-known/agentaddress.json").json()
    assert "outbound_email" in sending["capabilities"] and sending["outbound_email"]["configured"] is True
    assert sending["outbound_email"]["max_sends_per_day"] == 3
    assert "This server sends mail" in out.api.request("GET", "/skill.md").text
    silent = moto_api.request("GET", "/.well-known/agentaddress.json").json()
    assert "outbound_email" not in silent["capabilities"] and silent["outbound_email"]["configured"] is False
    assert "outbound_not_configured" in moto_api.request("GET", "/skill.md").text


def test_the_outbound_routes_are_documented(out: Outbound):
    paths = out.api.request("GET", "/openapi.json").json()["paths"]
    contacts = "/api/v1/addresses/{address_id}/email/contacts"
    assert {"get", "post"} <= set(paths[contacts]) and "delete" in paths[contacts + "/{email}"]
    send = paths["/api/v1/addresses/{address_id}/email/send"]["post"]
    assert {"200", "202"} <= set(send["responses"])
