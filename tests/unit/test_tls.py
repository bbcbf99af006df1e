"""Cairn's HTTPS clients share one TLS context (`cairn.tls`), which still checks every server."""

from __future__ import annotations

import socket
import ssl

import httpx
import pytest

from cairn.client import Inbox
from cairn.client.http import HttpClient
from cairn.entrypoints import address_resource
from cairn.runtime.http import HttpRuntimeStore
from cairn.tls import verified_context


def test_the_shared_context_checks_certificates_and_host_names_against_known_roots() -> None:
    context = verified_context()

    assert context is verified_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0


def test_clients_made_after_the_first_load_no_certificates_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new httpx client makes and fills a context of its own (about 28 ms); Cairn's clients take the shared one."""
    verified_context()
    made: list[object] = []
    create = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args or kwargs)
        return create(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    with socket.socket() as held:  # bound, never listening: every connection to it is refused
        held.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{held.getsockname()[1]}"
        HttpClient().close()
        Inbox(f"{nowhere}/api/v1/inbox/addr/secret").close()
        HttpRuntimeStore(nowhere).close()
        with pytest.raises(httpx.ConnectError):
            address_resource.provision(nowhere, {"TaskId": "t", "ExpiresInSeconds": "60"}, "key")
    assert made == []
    httpx.Client().close()  # what each of them did before
    assert len(made) == 1
