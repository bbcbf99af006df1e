"""Sends whose outcome never comes end as `email.outcome_unknown` on `cairn serve`, once each.

The relay (an aiosmtpd server the test runs) takes verification codes and
some messages at once, and holds the others' DATA without ever answering;
the server is killed (SIGKILL) while it waits, so those sends are committed,
their slots reserved, and no outcome will ever be reported. Restarted with
a deadline of seconds, the server's outcome sweep records
`email.outcome_unknown` for each of them, and nothing for the sends the relay
took: N sends, N outcome events.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path

import httpx
import pytest
from aiosmtpd.controller import Controller

from cairn.local.dynamodb_local import DynamoDBLocal, free_port
from tests.support.lambda_client import path_of
from tests.support.serve import ServeProcess

PERSON = "ada@example.org"
TAKEN, HELD = 2, 3
DEADLINE_SECONDS = 4
# Progress is waited on, however slowly the machine runs; only this long without the awaited state fails.
PATIENCE_SECONDS = 120


class HoldingRelay:
    """Takes codes and messages whose subject starts with `taken`; holds every other one's DATA unanswered."""

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.held = 0
        self.changed = threading.Condition()
        self.released = threading.Event()

    async def handle_DATA(self, server, session, envelope) -> str:
        message = BytesParser(policy=policy.default).parsebytes(envelope.content)
        code = re.search(r"code is: (\d{6})", message.get_content())
        if code is None and not str(message["Subject"]).startswith("taken"):
            with self.changed:
                self.held += 1
                self.changed.notify_all()
            while not self.released.is_set():
                await asyncio.sleep(0.05)
            return "451 4.3.0 Try again later"
        with self.changed:
            if code is not None:
                self.codes.append(code.group(1))
            self.changed.notify_all()
        return "250 2.0.0 OK"

    def wait_for(self, predicate) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, PATIENCE_SECONDS)


@pytest.fixture
def relay() -> Iterator[tuple[HoldingRelay, int]]:
    handler = HoldingRelay()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        handler.released.set()
        controller.stop()


def auth(created: dict) -> dict[str, str]:
    return {"Authorization": f"Bearer {created['credentials']['read_token']}"}


def send(client: httpx.Client, created: dict, key: str) -> httpx.Response:
    message = {"to": PERSON, "subject": f"{key} approval", "text": "Yes or no."}
    root = path_of(created["endpoints"]["address_url"])
    return client.post(f"{root}/email/send", json=message, headers={**auth(created), "Idempotency-Key": key})


def send_until_the_server_dies(base_url: str, created: dict, key: str) -> None:
    with httpx.Client(base_url=base_url, timeout=httpx.Timeout(PATIENCE_SECONDS)) as client:
        try:
            send(client, created, key)
        except httpx.HTTPError:
            pass  # the server was killed while the relay held the message: that is the point


def events_once(client: httpx.Client, created: dict, done) -> list[dict]:
    """The feed, long-polled until `done(events)` holds."""
    events: list[dict] = []
    give_up = time.monotonic() + PATIENCE_SECONDS
    while not done(events):
        assert time.monotonic() < give_up, f"the feed stopped at {[event['type'] for event in events]}"
        after = events[-1]["sequence"] if events else 0
        reply = client.get(
            path_of(created["endpoints"]["events_url"]), params={"after": after, "wait": 2}, headers=auth(created)
        )
        assert reply.status_code == 200, reply.text
        events += reply.json()["events"]
    return events


def test_sends_whose_outcome_never_comes_end_as_outcome_unknown_once_each(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path, relay: tuple[HoldingRelay, int]
) -> None:
    handler, port = relay
    options = {
        "dynamodb_endpoint": dynamodb_local.endpoint,
        "table": streamed_table,
        "env": {"CAIRN_OUTBOUND_OUTCOME_DEADLINE_SECONDS": str(DEADLINE_SECONDS)},
        "extra_args": ["--smtp-relay", f"127.0.0.1:{port}"],
    }
    server = ServeProcess(tmp_path, **options).start()
    senders: list[threading.Thread] = []
    try:
        with server.client() as client:
            provisioned = client.post("/api/v1/addresses", json={})
            assert provisioned.status_code == 201, provisioned.text
            created = provisioned.json()
            contacts = f"{path_of(created['endpoints']['address_url'])}/email/contacts"
            assert client.post(contacts, json={"email": PERSON}, headers=auth(created)).status_code == 202
            handler.wait_for(lambda: len(handler.codes) == 1)
            verified = client.post(contacts, json={"email": PERSON, "code": handler.codes[0]}, headers=auth(created))
            assert verified.status_code == 200, verified.text
            for n in range(TAKEN):
                assert send(client, created, f"taken-{n}").status_code == 202
        senders = [
            threading.Thread(target=send_until_the_server_dies, args=(server.base_url, created, f"held-{n}"))
            for n in range(HELD)
        ]
        for thread in senders:
            thread.start()
        handler.wait_for(lambda: handler.held == HELD)
    finally:
        server.kill()
    for thread in senders:
        thread.join(PATIENCE_SECONDS)

    with ServeProcess(tmp_path, **options) as restarted, restarted.client() as client:
        events = events_once(client, created, lambda events: len(events) >= 2 * (TAKEN + HELD))
        sends = {event["id"]: event["data"]["subject"] for event in events if event["type"] == "email.sent"}
        outcomes = {
            sends[event["data"]["send_event_id"]]: event["type"] for event in events if event["type"] != "email.sent"
        }
        assert len(sends) == TAKEN + HELD and len(events) == 2 * len(sends)
        assert outcomes == {
            **{f"taken-{n} approval": "email.delivered" for n in range(TAKEN)},
            **{f"held-{n} approval": "email.outcome_unknown" for n in range(HELD)},
        }
        # Nothing more comes: a later sweep finds every outcome claimed.
        later = client.get(
            path_of(created["endpoints"]["events_url"]),
            params={"after": events[-1]["sequence"], "wait": DEADLINE_SECONDS},
            headers=auth(created),
        )
        assert later.json()["events"] == []
