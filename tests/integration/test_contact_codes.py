"""Verification codes against a holder of the read token who guesses, on DynamoDB Local through the handler.

Whatever order the holder asks for codes, guesses, removes contacts and adds
them again in, a refused request stores nothing, removing a contact resets
no bound, and the tries at codes per address and per recipient per UTC day
stay within the documented bounds. The code mail carries nothing the holder
chose but a short label of letters.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from email import policy
from email.parser import BytesParser

import pytest

from cairn.email.outbound_ports import ComposedMessage, Handoff
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services, path_of

PERSON = "ada@example.org"
DAY = 86_400


class Mailbox:
    """Every mail handed over, by recipient."""

    def __init__(self) -> None:
        self.sent: list[ComposedMessage] = []
        self._lock = threading.Lock()

    def send(self, message: ComposedMessage) -> Handoff:
        with self._lock:
            self.sent.append(message)
        return Handoff(provider_message_id="p", outcome="delivered")

    def to(self, email: str) -> list[str]:
        """The text of each mail to `email`, oldest first."""
        return [
            BytesParser(policy=policy.default).parsebytes(mail.raw).get_content()
            for mail in self.sent
            if mail.recipient == email
        ]

    def codes_for(self, email: str) -> list[str]:
        """Every code mailed to `email`, oldest first."""
        return [re.findall(r"code is: (\d{6})", text)[0] for text in self.to(email)]

    def code_for(self, email: str) -> str:
        return self.codes_for(email)[-1]


class Holder:
    """One address, driven through its outbound routes with its read token."""

    def __init__(self, api: LambdaClient, **provision: str) -> None:
        self.api = api
        self.created = api.provision(**provision)
        self.root = path_of(self.created["endpoints"]["address_url"])
        self.token = self.created["credentials"]["read_token"]

    def ask(self, email: str):
        return self.api.request("POST", f"{self.root}/email/contacts", json_body={"email": email}, token=self.token)

    def guess(self, email: str, code: str):
        body = {"email": email, "code": code}
        return self.api.request("POST", f"{self.root}/email/contacts", json_body=body, token=self.token)

    def remove(self, email: str):
        return self.api.request("DELETE", f"{self.root}/email/contacts/{email}", token=self.token)

    def contacts(self) -> list[tuple[str, str]]:
        listed = self.api.request("GET", f"{self.root}/email/contacts", token=self.token).json()["contacts"]
        return [(contact["email"], contact["status"]) for contact in listed]


@pytest.fixture
def mailbox() -> Mailbox:
    return Mailbox()


@pytest.fixture
def make_api(dynamodb_local, local_table: str, clock: FakeClock, mailbox: Mailbox) -> Callable[..., LambdaClient]:
    def make(**overrides) -> LambdaClient:
        services = make_services(
            table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock, mailer=mailbox, **overrides
        )
        return LambdaClient(services)

    return make


def wrong(*codes: str) -> str:
    """A well-formed code that is none of `codes`."""
    return next(candidate for candidate in ("000000", "111111", "222222") if candidate not in codes)


def to_next_day(clock: FakeClock, *, at: float) -> None:
    """Move the clock to `at` seconds after the next UTC midnight (before it when negative).

    A fraction keeps whole-second arithmetic clear of the boundary.
    """
    clock.advance(DAY - clock() % DAY + at)


def judged(reply) -> bool:
    """A try the server compared with a code: right or wrong."""
    return reply.status == 200 or reply.error_code == "wrong_code"


# -- refused requests, removal ---------------------------------------------------------------------


def test_a_refused_code_request_stores_nothing_and_the_earlier_code_still_works(make_api, mailbox, clock):
    holder = Holder(make_api(outbound_verifications_per_day=2))
    assert holder.ask(PERSON).status == 202
    first = mailbox.code_for(PERSON)
    assert holder.ask("grace@example.org").status == 202
    clock.advance(61)

    again = holder.ask(PERSON)
    assert (again.status, again.error_code) == (429, "rate_limited")
    new_contact = holder.ask("linus@example.org")
    assert (new_contact.status, new_contact.error_code) == (429, "rate_limited")
    assert int(new_contact.headers["Retry-After"]) >= 1

    assert len(mailbox.to(PERSON)) == 1 and mailbox.to("linus@example.org") == []
    assert holder.contacts() == [(PERSON, "pending"), ("grace@example.org", "pending")]
    assert holder.guess(PERSON, first).status == 200


def test_removing_a_contact_and_adding_it_again_resets_neither_the_minute_nor_the_attempts(make_api, mailbox, clock):
    holder = Holder(make_api())
    assert holder.ask(PERSON).status == 202
    code = mailbox.code_for(PERSON)
    for left in (4, 3, 2, 1, 0):
        refused = holder.guess(PERSON, wrong(code))
        assert (refused.error_code, refused.json()["error"]["attempts_left"]) == ("wrong_code", left)
    assert holder.guess(PERSON, code).error_code == "too_many_attempts"

    assert holder.remove(PERSON).status == 200
    clock.advance(30)
    again = holder.ask(PERSON)
    assert (again.status, again.error_code) == (429, "rate_limited")
    wait = int(again.headers["Retry-After"])
    assert 1 <= wait <= 31
    # Nothing came of the refused request: no contact, no code to guess at.
    assert holder.contacts() == []
    assert holder.guess(PERSON, code).error_code == "unknown_recipient"
    assert len(mailbox.to(PERSON)) == 1

    # Served again once the minute is over, as `Retry-After` said.
    clock.advance(wait)
    assert holder.ask(PERSON).status == 202
    assert holder.guess(PERSON, mailbox.code_for(PERSON)).status == 200


# -- tries per UTC day -----------------------------------------------------------------------------


def test_tries_per_address_per_day_stay_within_codes_times_attempts_whatever_the_holder_does(make_api, mailbox, clock):
    holder = Holder(make_api(outbound_verifications_per_day=3))
    to_next_day(clock, at=0.5)
    people = [f"p{index}@example.org" for index in range(4)]
    tries = []
    # Ask, guess until refused, remove, come back a minute later: for half an hour of one UTC day.
    for round_ in range(30):
        person = people[round_ % len(people)]
        holder.ask(person)
        tries += [holder.guess(person, wrong(*mailbox.codes_for(person))) for _ in range(6)]
        holder.remove(person)
        clock.advance(61)

    assert sum(judged(reply) for reply in tries) == 3 * 5
    assert {reply.error_code for reply in tries if not judged(reply)} <= {
        "too_many_attempts",
        "unknown_recipient",
        "rate_limited",
    }
    assert len(mailbox.sent) == 3


def test_the_tries_a_day_allows_include_those_at_a_code_from_the_day_before(make_api, mailbox, clock):
    holder = Holder(make_api(outbound_verifications_per_day=1))
    to_next_day(clock, at=-119.5)
    assert holder.ask(PERSON).status == 202
    yesterdays = mailbox.code_for(PERSON)
    clock.advance(150)
    assert holder.ask("grace@example.org").status == 202
    todays = mailbox.code_for("grace@example.org")

    assert [holder.guess(PERSON, wrong(yesterdays)).error_code for _ in range(5)] == ["wrong_code"] * 5
    # Five tries are today's share of one code: even the right code waits for tomorrow.
    refused = holder.guess("grace@example.org", todays)
    assert (refused.status, refused.error_code) == (429, "rate_limited")
    assert int(refused.headers["Retry-After"]) == DAY - 30
    assert holder.contacts() == [(PERSON, "pending"), ("grace@example.org", "pending")]


# -- one recipient, every address ------------------------------------------------------------------


def test_one_person_is_mailed_at_most_the_recipient_bound_of_codes_a_day_from_all_addresses(make_api, mailbox, clock):
    api = make_api(outbound_verifications_per_recipient_per_day=3)
    to_next_day(clock, at=0.5)
    holders = [Holder(api) for _ in range(4)]
    replies = [holder.ask(PERSON) for holder in holders]
    assert [reply.status for reply in replies] == [202, 202, 202, 429]
    assert replies[-1].error_code == "rate_limited"
    assert len(mailbox.to(PERSON)) == 3
    assert holders[-1].contacts() == []
    # Another person is not held back by the first one's bound.
    assert holders[-1].ask("grace@example.org").status == 202


def test_plus_tags_of_one_mailbox_share_its_bound(make_api, mailbox, clock):
    """Counted by the address string, each `+tag` brought the bound's codes again to one inbox."""
    api = make_api(outbound_verifications_per_recipient_per_day=3)
    to_next_day(clock, at=0.5)
    tagged = ["ada+1@example.org", "ada+build@example.org", "Ada+x@Example.org", PERSON]
    replies = [Holder(api).ask(email) for email in tagged]
    assert [reply.status for reply in replies] == [202, 202, 202, 429]
    assert Holder(api).ask("adam+1@example.org").status == 202, "another mailbox"


def test_tries_at_one_persons_codes_are_bounded_over_all_addresses(make_api, mailbox, clock):
    api = make_api(outbound_verifications_per_recipient_per_day=1)
    first, second = Holder(api), Holder(api)
    to_next_day(clock, at=-119.5)
    assert first.ask(PERSON).status == 202
    yesterdays = mailbox.code_for(PERSON)
    clock.advance(150)
    assert second.ask(PERSON).status == 202

    assert [first.guess(PERSON, wrong(yesterdays)).error_code for _ in range(5)] == ["wrong_code"] * 5
    refused = second.guess(PERSON, mailbox.code_for(PERSON))
    assert (refused.status, refused.error_code) == (429, "rate_limited")


# -- what the code mail says -----------------------------------------------------------------------

HOSTILE = (
    "URGENT: your account is locked.\nVisit https://evil.example/login?u=1 or call +1 555 0100\n\n"
    "Reply with the code to security@evil.example  www.evil.example"
)


@pytest.mark.parametrize(
    ("provision", "label"),
    [
        ({"name": HOSTILE, "task_id": "ignored"}, "URGENT your account is locked"),
        ({"task_id": HOSTILE}, "URGENT your account is locked"),
        ({"name": "Überweisung prüfen"}, "Uberweisung prufen"),
        ({"name": "ｈｔｔｐｓ：／／ｅｖｉｌ．ｅｘａｍｐｌｅ"}, "https evil example"),
        ({"name": "Проверка счёта 42"}, None),
        ({"name": "https://x.example/" + "a" * 40}, "https x example"),
        ({}, None),
    ],
)
def test_the_code_mail_carries_nothing_the_holder_chose_but_a_short_label(
    make_api, mailbox, provision: dict, label: str | None
):
    holder = Holder(make_api(), **provision)
    assert holder.ask(PERSON).status == 202
    [mail] = mailbox.sent
    message = BytesParser(policy=policy.default).parsebytes(mail.raw)
    address = holder.created["address"]["email"]
    named = f' (it calls itself "{label}")' if label else ""
    assert message.get_content().splitlines() == [
        f"An automated task{named} would like to send you email from {address}.",
        "",
        f"Its verification code is: {mailbox.code_for(PERSON)}",
        "",
        "Give this code to the task only if you expect its mail. The code expires in 15 minutes.",
        "If you did not expect this message, ignore it: nothing will be sent to you without the code.",
    ]
    assert message["Subject"] == "Your verification code"
    assert all(len(value) < 100 and "evil" not in value for value in message.values())
