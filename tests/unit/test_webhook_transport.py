"""One webhook POST against receivers on 127.0.0.1: one deadline for the whole answer, never an exception."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
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
