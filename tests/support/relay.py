"""A real SMTP relay for outbound mail tests: an aiosmtpd server that refuses when told to and keeps what it takes."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from aiosmtpd.controller import Controller

from cairn.local.dynamodb_local import free_port


class Relay:
    """Keeps every message it accepts; answers the next `refusals` messages with `refusal` instead.

    While `open` is cleared, a message's DATA waits unanswered (`waiting` counts them): a hand-off in flight.
    """

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.refused = 0
        self.refusals = 0
        self.refusal = "451 4.3.0 Try again later"
        self.waiting = 0
        self.open = threading.Event()
        self.open.set()
        self.arrived = threading.Condition()

    def refuse_next(self, count: int, answer: str = "451 4.3.0 Try again later") -> None:
        with self.arrived:
            self.refusals, self.refusal = count, answer

    async def handle_DATA(self, server, session, envelope) -> str:
        if not self.open.is_set():
            with self.arrived:
                self.waiting += 1
                self.arrived.notify_all()
            while not self.open.is_set():
                await asyncio.sleep(0.02)
        with self.arrived:
            if self.refusals > 0:
                self.refusals -= 1
                self.refused += 1
                return self.refusal
            self.messages.append(BytesParser(policy=policy.default).parsebytes(envelope.content))
            self.arrived.notify_all()
        return "250 2.0.0 OK"

    def wait_for(self, count: int, timeout: float = 10) -> EmailMessage:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.messages) >= count, timeout)
            return self.messages[count - 1]

    def wait_until(self, predicate, timeout: float = 30) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: predicate(self), timeout)

    def to(self, email: str) -> list[EmailMessage]:
        with self.arrived:
            return [message for message in self.messages if message["To"] == email]

    def last_code(self) -> str:
        with self.arrived:
            texts = [message.get_content() for message in self.messages]
        return [found.group(1) for text in texts if (found := re.search(r"code is: (\d{6})", text))][-1]


@contextmanager
def running_relay() -> Iterator[tuple[Relay, int]]:
    """A relay listening on 127.0.0.1, and its port, stopped on exit."""
    relay = Relay()
    port = free_port()
    controller = Controller(relay, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield relay, port
    finally:
        controller.stop()
