"""One webhook POST against receivers on 127.0.0.1: one deadline for the whole answer, never an exception."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cairn.wakeups import egress
from cairn.wakeups.models import Outcome, SigningSecret, Subscription, Target, TargetKind
from cairn.wakeups.payload import probe_delivery
from cairn.wakeups.subscriptions import new_secret
from cairn.wakeups.webhook import WebhookTransport
from tests.support.webhooks import holding_receiver, receiver

ADDRESS = "addr_" + "a" * 26
# Far beyond the 1 s deadline: only reached when nothing cuts the delivery.
CEILING = 60.0


def webhook(url: str, *secrets: str) -> Subscription:
    kept = tuple(SigningSecret(secret) for secret in secrets or (new_secret(),))
    return Subscription(
        "sub_" + "0" * 24, ADDRESS, Target(TargetKind.WEBHOOK, {"url": url}), (), None, 0.0, secrets=kept
    )


def send(subscription: Subscription, timeout: float = 1) -> Outcome:
    transport = WebhookTransport(timeout=timeout, allow_local=True)
    now = time.time()  # receivers check the signed timestamp against the real clock
    return transport.send(subscription, probe_delivery(ADDRESS, subscription.id, "test_1", now), now)


def finishes(work: Callable[[], Any], ceiling: float = CEILING) -> Any:
    """`work()`'s result, failing the test if it is still running after `ceiling` seconds."""
    box: list[Any] = []
    done = threading.Event()
    worker = threading.Thread(target=lambda: (box.append(work()), done.set()), daemon=True)
    worker.start()
    assert done.wait(ceiling), f"still sending after {ceiling} s"
    return box[0]


def test_an_answer_trickled_byte_by_byte_is_cut_at_the_deadline():
    with holding_receiver(interval=0.1) as slow:
        outcome = finishes(lambda: send(webhook(slow.url)))
        # The verdict came while the receiver still held its answer open: Cairn hung up on it.
        assert not slow.released.is_set()
        assert slow.cut.wait(CEILING)
    assert (outcome.delivered, outcome.gone, outcome.status_code) == (False, False, None)
    assert "deadline" in (outcome.error or "")


def test_name_resolution_counts_against_the_deadline(monkeypatch: pytest.MonkeyPatch):
    real = socket.getaddrinfo
    hang = threading.Event()

    def slow_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-dns.example":
            hang.wait(2 * CEILING)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow_dns)
    try:
        outcome = finishes(lambda: send(webhook("https://slow-dns.example/hook")))
    finally:
        hang.set()
    assert not outcome.delivered
    assert "deadline" in (outcome.error or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/a b",
        "http://127.0.0.1:9/a\x00b",
        "http://127.0.0.1:9/a\x7f",
        "http://127.0.0.1:9/a\r\nX-Injected: 1",
        "http://127.0.0.1:9/caf\u00e9",
    ],
)
def test_a_stored_url_no_request_can_carry_is_a_failure_not_an_exception(url: str):
    outcome = send(webhook(url))
    assert not outcome.delivered and not outcome.gone
    assert outcome.error


def test_deliveries_say_they_are_cairn_wake_ups():
    with receiver() as hook:
        subscription = webhook(hook.url)
        assert send(subscription, timeout=10).delivered
        (request,) = hook.wait_for(1)
    assert request.headers["cairn-wakeup"] == subscription.id
    assert Webhook(subscription.secrets[0].secret).verify(request.body, request.headers)["type"] == "subscription.test"


def test_at_most_two_secrets_sign_whatever_is_stored():
    stored = [new_secret() for _ in range(5)]
    with receiver() as hook:
        assert send(webhook(hook.url, *stored), timeout=10).delivered
        (request,) = hook.wait_for(1)
    signatures = request.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    # The newest two (the current secret and the one it replaced) verify; older ones no longer sign.
    for secret in stored[:2]:
        Webhook(secret).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(stored[2]).verify(request.body, request.headers)


@pytest.mark.parametrize("host", ["a..example.com", "a" * 64 + ".com"])
def test_a_name_the_idna_codec_cannot_encode_is_unresolvable(host: str):
    """Such a name, stored before names were checked, fails its delivery as unresolvable, not with an error."""
    with pytest.raises(egress.Unresolvable):
        egress.resolve(host, 443, allow_local=False)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no one vouches for, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "receiver.pem", folder / "receiver.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


class Accepting(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_an_https_receiver_whose_certificate_no_one_vouches_for_is_not_delivered_to(tmp_path: Path):
    cert_file, key_file = self_signed_certificate(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Accepting)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = send(webhook(f"https://127.0.0.1:{server.server_address[1]}/hook"))
    finally:
        server.shutdown()
        server.server_close()
    assert (outcome.delivered, outcome.status_code) == (False, None)
    assert "CERTIFICATE_VERIFY_FAILED" in (outcome.error or "")
