"""The TLS settings of Cairn's HTTPS clients, made once per process.

httpx makes an SSL context for every new client and loads certifi's bundle of
root certificates into it: about 28 ms of processor time, which every
`Address`, `Inbox` and `HttpRuntimeStore` made without a shared client paid,
for a context equal to the last one. An SSL context may be shared between
clients and threads, so the clients share this one: httpx's own defaults
(certifi's roots, or `SSL_CERT_FILE` / `SSL_CERT_DIR` as they are set when it
is first asked for), made on first use.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def verified_context() -> ssl.SSLContext:
    """The context that checks servers' certificates and host names, as a new httpx client would make it."""
    return httpx.create_ssl_context()
