"""Where a webhook may connect: never to private, loopback, link-local or metadata addresses.

The rules are checked when a subscription is created and again at every
connection, on the addresses DNS gives at that moment, and the connection
goes to the address that was checked (so a name cannot be re-pointed
between the check and the connect).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from urllib.parse import SplitResult, urlsplit

from cairn.errors import TargetRefused

# Names `cairn serve` lets a webhook reach over plain HTTP, so it can be tried on one machine.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
MAX_URL_LENGTH = 2048


class EgressRefused(Exception):
    """The target resolves to an address no webhook may reach."""


class Unresolvable(EgressRefused):
    """DNS gives the target's name no address (now)."""


def check_url(url: str, *, allow_local: bool) -> SplitResult:
    """The parsed URL if its form is allowed; `TargetRefused` otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _refused("The webhook URL is not a valid URL.") from None
    host = (parts.hostname or "").lower()
    local = allow_local and host in LOCAL_HOSTS
    if len(url) > MAX_URL_LENGTH or not host or parts.username or parts.password:
        raise _refused(f"The webhook URL must be an absolute URL of at most {MAX_URL_LENGTH} characters, no user.")
    if parts.scheme != "https" and not (local and parts.scheme == "http"):
        raise _refused("The webhook URL must use https.")
    if port == 0:
        raise _refused("The webhook URL's port must not be 0.")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None and not local and not is_public(literal):
        raise _refused("The webhook URL names a private, loopback, link-local or metadata address.")
    return parts


def check_destination(url: str, *, allow_local: bool) -> None:
    """`check_url`, then the addresses DNS gives the name now; `TargetRefused` if any is forbidden.

    A name that does not resolve yet passes: it may be published later, and
    every delivery checks again before it connects.
    """
    parts = check_url(url, allow_local=allow_local)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        resolve(parts.hostname or "", port, allow_local=allow_local)
    except Unresolvable:
        return
    except EgressRefused:
        message = "The webhook URL's name resolves to a private, loopback, link-local or metadata address."
        raise _refused(message) from None


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A globally routable unicast address (not private, loopback, link-local, metadata, reserved)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public(address.ipv4_mapped)
    return address.is_global and not address.is_multicast


def resolve(host: str, port: int, *, allow_local: bool) -> str:
    """One address of `host` that a webhook may reach; `EgressRefused` if any is forbidden."""
    local = allow_local and host.lower() in LOCAL_HOSTS
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise Unresolvable(f"cannot resolve {host}: {error}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for address in addresses:
        if not (is_public(address) or (local and address.is_loopback)):
            raise EgressRefused(f"{host} resolves to a forbidden address")
    if not addresses:
        raise Unresolvable(f"{host} has no address")
    return str(addresses[0])


def open_connection(parts: SplitResult, *, timeout: float, allow_local: bool) -> http.client.HTTPConnection:
    """An HTTP(S) connection to the checked address of `parts`, with TLS verified against the name."""
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve(host, port, allow_local=allow_local)
    if parts.scheme == "https":
        return _PinnedHTTPS(host, port, address, timeout)
    return _PinnedHTTP(host, port, address, timeout)


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = ssl.create_default_context().wrap_socket(raw, server_hostname=self.host)


def _refused(message: str) -> TargetRefused:
    return TargetRefused(message, field="target.url")
