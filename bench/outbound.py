"""Outbound mail: DynamoDB calls per contact verification and per send, and sends per second to a local relay.

The services' own `Contacts` and `Sending` run on a counted DynamoDB client
with `SmtpRelayMailer`, the mailer `cairn serve --smtp-relay` uses, handing
each message over SMTP to an aiosmtpd relay in this process that keeps
nothing. A send appends `email.sent` and, once the relay took the message,
`email.delivered`, as `cairn serve` does.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email import policy
from email.parser import BytesParser
from typing import cast

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from bench.calls import CallCounter, CallCounts
from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.client import make_client
from cairn.local.dynamodb_local import free_port
from cairn.local.outbound import SmtpRelayMailer
from cairn.services import Services
from cairn.settings import MAX_EVENTS_LIMIT, Settings

PERSON = "ada@example.org"
MESSAGE = {"to": PERSON, "subject": "Approve invoice 42?", "text": "Reply YES or NO.\n" * 20}
SENDERS = (1, 4)


class _Relay:
    """An SMTP server that accepts every message and remembers only the last one."""

    def __init__(self) -> None:
        self.last = b""
        self.count = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self._lock:
            # The controller leaves `decode_data` off, so aiosmtpd hands over the content as bytes.
            self.last = cast(bytes, envelope.content)
            self.count += 1
        return "250 2.0.0 OK"


def measure_outbound(settings: Settings, table_name: str, trials: int, seconds: float, warmup: float) -> Table:
    relay = _Relay()
    port = free_port()
    controller = Controller(relay, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        return _measure(settings, table_name, relay, port, trials, seconds, warmup)
    finally:
        controller.stop()


def _measure(
    settings: Settings, table_name: str, relay: _Relay, port: int, trials: int, seconds: float, warmup: float
) -> Table:
    settings = settings.replace(table_name=table_name, outbound_max_sends_per_day=10**9, max_events=MAX_EVENTS_LIMIT,
                outbound_verifications_per_day=10**9, outbound_verifications_per_recipient_per_day=10**9)  # fmt: skip
    client = make_client(settings)
    counter = CallCounter(client)
    services = Services.build(settings, client=client, mailer=SmtpRelayMailer("127.0.0.1", port))
    table = Table(
        f"Outbound mail (Contacts and Sending on DynamoDB Local, SMTP relay on 127.0.0.1, {trials} trials)",
        ["operation", "DynamoDB calls per operation", "p50 ms", "p99 ms"],
    )
    addresses = [_address(services) for _ in range(trials)]
    timed: dict[str, list[float]] = {}
    counts: dict[str, list[CallCounts]] = {}
    for address_id, token in addresses:
        for name, step in _steps(services, relay, address_id, token):
            timed.setdefault(name, [])
            counts.setdefault(name, [])
            counter.take()
            began = time.perf_counter()
            step()
            timed[name].append(time.perf_counter() - began)
            counts[name].append(counter.take())
    for name, latencies in timed.items():
        combined = CallCounts.combined(counts[name], per=len(counts[name]))
        table.add(name, combined, percentile_ms(latencies, 50), percentile_ms(latencies, 99))
    for senders in SENDERS:
        rate = _sends_per_second(services, addresses[0], senders, seconds, warmup)
        table.add(f"sends/s, {senders} sender(s) on one address", "", f"{rate:.0f} sends/s", "")
    table.notes += [
        "Calls per operation include the read-token check (GetItem of the head). A send: the contact "
        "(GetItem), the append (one TransactWriteItems: head, email.sent, idempotency claim, daily count), "
        "the hand-off lease (UpdateItem), then, after the relay took it, the hand-off marked done (UpdateItem) "
        "and the email.delivered append. The same send again: head, contact, the append that finds the claim, "
        "the sent event's GetItem for its message id, the lease refused as done, and the outcome recorded "
        "again in case it was lost (a TransactWriteItems that finds its claim); nothing is mailed.",
        "Asking for a code (a new contact): head, the contact (GetItem, which finds none), then one "
        "TransactWriteItems: the address live, the contact and the contact count, the time of the code to this "
        "person, the day's codes per address and per recipient; then the mail. "
        "Verifying: head, the contact (GetItem), then one TransactWriteItems: the address live, the attempt "
        "spent on the code as read and the contact verified, the day's tries per address and per recipient.",
        "Time includes the SMTP hand-off to the relay on this machine (one connection per message).",
    ]
    return table


def _steps(services: Services, relay: _Relay, address_id: str, token: str) -> list[tuple[str, Callable[[], object]]]:
    """One address's way from a new contact to a repeated send, in order."""
    return [
        ("ask for a code", lambda: services.contacts.request_code(address_id, token, PERSON)),
        ("verify with the code", lambda: services.contacts.verify(address_id, token, PERSON, _code(relay))),
        ("send", lambda: services.sending.send(address_id, token, "k", MESSAGE)),
        ("same send again", lambda: services.sending.send(address_id, token, "k", MESSAGE)),
    ]


def _address(services: Services) -> tuple[str, str]:
    provisioned = services.provisioning.provision(client_ip="127.0.0.1", task_id="bench-mail")
    return provisioned.record.id, provisioned.read_token


def _code(relay: _Relay) -> str:
    text = BytesParser(policy=policy.default).parsebytes(relay.last).get_content()
    found = re.search(r"code is: (\d{6})", text)
    assert found, "no code in the relayed mail"
    return found.group(1)


def _sends_per_second(
    services: Services, address: tuple[str, str], senders: int, seconds: float, warmup: float
) -> float:
    address_id, token = address
    keys = itertools.count()
    lock = threading.Lock()

    def next_key() -> str:
        with lock:
            return f"rate-{senders}-{next(keys)}"

    def run(until: float) -> int:
        done = 0
        while time.monotonic() < until:
            services.sending.send(address_id, token, next_key(), MESSAGE)
            done += 1
        return done

    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(run, [time.monotonic() + warmup] * senders))
        began = time.monotonic()
        total = sum(pool.map(run, [began + seconds] * senders))
    return total / (time.monotonic() - began)
