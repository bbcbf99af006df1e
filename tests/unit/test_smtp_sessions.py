"""`cairn serve`'s SMTP listener turns sessions away at the greeting past its caps, and counts them back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from cairn.local.smtp import Listener, MailHandler, SessionCount
from cairn.services import Services
from tests.support.lambda_client import settings_for_tests


@pytest.fixture
def listener(tmp_path) -> Iterator[tuple[int, SessionCount]]:
    services = Services.in_memory(settings_for_tests(email_blob_dir=tmp_path))
    sessions = SessionCount(most=3, most_per_peer=2)
    handler = MailHandler(services.email, services.raw_messages, "cairn.localhost")
    port = free_port()
    controller = Listener(handler, sessions, hostname="127.0.0.1", port=port, server_hostname="cairn.localhost")
    controller.start()
    try:
        settled(sessions, 0)  # the controller's own test connection, made at start
        yield port, sessions
    finally:
        controller.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def settled(sessions: SessionCount, open_now: int) -> None:
    """Wait until the listener's loop has counted connections that opened or closed."""
    deadline = time.monotonic() + 10
    while len(sessions) != open_now and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(sessions) == open_now


def connect(port: int, source: str = "127.0.0.1") -> tuple[socket.socket, bytes]:
    """A connection from `source` and the first line the server sends it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return sock, sock.makefile("rb").readline()


def test_a_peer_past_its_cap_is_turned_away_until_one_of_its_sessions_ends(listener):
    port, sessions = listener
    first, greeting = connect(port)
    second, _ = connect(port)
    assert greeting.startswith(b"220 ")
    turned_away, refusal = connect(port)
    assert refusal.startswith(b"421 4.7.0 "), refusal
    assert turned_away.recv(1) == b"", "the server closes a session it turned away"
    other_peer, greeting = connect(port, source="127.0.0.2")
    assert greeting.startswith(b"220 "), "another peer still gets in"
    first.close()
    settled(sessions, 2)
    again, greeting = connect(port)
    assert greeting.startswith(b"220 ")
    for sock in (second, turned_away, other_peer, again):
        sock.close()
    settled(sessions, 0)


def test_past_the_cap_in_all_every_peer_is_turned_away(listener):
    port, sessions = listener
    held = [connect(port, source)[0] for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3")]
    settled(sessions, 3)
    turned_away, refusal = connect(port, source="127.0.0.4")
    assert refusal.startswith(b"421 "), refusal
    turned_away.close()
    held.pop().close()
    settled(sessions, 2)
    _, greeting = connect(port, source="127.0.0.4")
    assert greeting.startswith(b"220 ")
    for sock in held:
        sock.close()
