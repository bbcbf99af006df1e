"""Where a webhook may connect: never to private, loopback, link-local or metadata addresses, nor Cairn.

The rules are checked when a subscription is created and again at every
connection, on the addresses DNS gives at that moment, and the connection
goes to the address that was checked (so a name cannot be re-pointed
between the check and the connect). A URL that names the service itself
(its API's domains, `cairn serve`'s own address) is refused too: a
subscription delivering into an inbox of the same service feeds itself.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

import anyio.to_thread
import httpcore

from cairn.errors import TargetRefused

# Names `cairn serve` lets a webhook reach over plain HTTP, so it can be tried on one machine.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"https": 443, "http": 80}

# IPv6 forms that reach an IPv4 host through the address in their last 32 bits. The IPv4-mapped
# form (::ffff:0:0/96) and 6to4 and Teredo are read by `ipaddress` itself.
_IPV4_IN_LAST_32_BITS = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible, deprecated (RFC 4291)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64's well-known prefix (RFC 6052)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated, for SIIT (RFC 2765)
)
# Local-use NAT64 (RFC 8215) translates into the operator's own IPv4 network, wherever the IPv4 part sits.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


class EgressRefused(Exception):
    """The target resolves to an address no webhook may reach."""


class Unresolvable(EgressRefused):
    """DNS gives the target's name no address (now)."""


def check_url(url: str, *, allow_local: bool, own_origins: Iterable[str] = ()) -> SplitResult:
    """The parsed URL if its form is allowed; `TargetRefused` otherwise.

    `own_origins` are base URLs of this service (`https://api.example.com`,
    `http://127.0.0.1:8000`): a URL on one of their hosts is refused.
    """
    parts = _parse(url)
    host = (parts.hostname or "").lower()
    local = allow_local and host in LOCAL_HOSTS
    if parts.scheme != "https" and not (local and parts.scheme == "http"):
        raise _refused("The webhook URL must use https.")
    if any(_origin(parts) == _origin(urlsplit(origin)) for origin in own_origins):
        raise _refused("The webhook URL points at Cairn itself: a wake-up cannot be delivered into a Cairn inbox.")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None and not local and not is_public(literal):
        raise _refused("The webhook URL names a private, loopback, link-local or metadata address.")
    return parts


def _parse(url: str) -> SplitResult:
    """The URL's parts if it is one absolute URL, as stored, with a host and no user; `TargetRefused` otherwise."""
    # Python's parser drops tabs and line breaks and strips spaces, so the URL it checks would not be
    # the one stored; and no request line can carry them, or control and non-ASCII characters, as given.
    if not (url.isascii() and url.isprintable()) or " " in url:
        raise _refused(
            "The webhook URL must be ASCII without spaces or control characters "
            "(percent-encode them; write an international name in its xn-- form)."
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _refused("The webhook URL is not a valid URL.") from None
    if len(url) > MAX_URL_LENGTH or not parts.hostname or parts.username or parts.password:
        raise _refused(f"The webhook URL must be an absolute URL of at most {MAX_URL_LENGTH} characters, no user.")
    if port == 0:
        raise _refused("The webhook URL's port must not be 0.")
    if not _is_host(parts.hostname):
        raise _refused("The webhook URL's host is no name DNS can hold: labels of 1 to 63 characters, 253 in all.")
    return parts


def _is_host(host: str) -> bool:
    """An IP address, or a name of labels of 1 to 63 characters, 253 in all (a final dot allowed)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        name = host.removesuffix(".")
        return 0 < len(name) <= 253 and all(0 < len(label) <= 63 for label in name.split("."))


def check_destination(url: str, *, allow_local: bool, own_origins: Iterable[str] = ()) -> None:
    """`check_url`, then the addresses DNS gives the name now; `TargetRefused` if any is forbidden.

    A name that does not resolve yet passes: it may be published later, and
    every delivery checks again before it connects.
    """
    parts = check_url(url, allow_local=allow_local, own_origins=own_origins)
    try:
        resolve(parts.hostname or "", port_of(parts), allow_local=allow_local)
    except Unresolvable:
        return
    except EgressRefused:
        message = "The webhook URL's name resolves to a private, loopback, link-local or metadata address."
        raise _refused(message) from None


def port_of(parts: SplitResult) -> int:
    return parts.port or DEFAULT_PORTS.get(parts.scheme, 443)


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A globally routable unicast address (not private, loopback, link-local, metadata, reserved).

    An IPv6 address that carries an IPv4 one (mapped, compatible, translated,
    NAT64, 6to4, Teredo) is public only if that IPv4 address is too: a translator
    or relay on the way would deliver it there.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public(address.ipv4_mapped)
        if address in _LOCAL_NAT64 or not all(is_public(inner) for inner in _embedded_ipv4(address)):
            return False
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local  # fec0::/10, in no table
    return address.is_global and not address.is_multicast and not site_local


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = [address.sixtofour] if address.sixtofour is not None else []
    if address.teredo is not None:
        found.extend(address.teredo)  # the relay server and the (de-obfuscated) client
    if any(address in network for network in _IPV4_IN_LAST_32_BITS):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF))
    return found


def resolve(host: str, port: int, *, allow_local: bool) -> str:
    """One address of `host` that a webhook may reach; `EgressRefused` if any is forbidden."""
    local = allow_local and host.lower() in LOCAL_HOSTS
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:  # UnicodeError: a name the IDNA codec cannot encode
        raise Unresolvable(f"cannot resolve {host}: {error}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for address in addresses:
        if not (is_public(address) or (local and address.is_loopback)):
            raise EgressRefused(f"{host} resolves to a forbidden address")
    if not addresses:
        raise Unresolvable(f"{host} has no address")
    return str(addresses[0])


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's connections, each to the address `resolve` checked for the URL's name.

    TLS still verifies the certificate against the name (httpcore passes it
    as the server name). The lookup runs on a worker thread that a deadline
    abandons, so a slow DNS answer cannot hold a delivery past it.
    """

    def __init__(self, *, allow_local: bool) -> None:
        self._allow_local = allow_local
        self._network = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        lookup = functools.partial(resolve, host, port, allow_local=self._allow_local)
        address = await anyio.to_thread.run_sync(lookup, abandon_on_cancel=True)
        return await self._network.connect_tcp(address, port, timeout, local_address, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


def _origin(parts: SplitResult) -> tuple[str, int | None]:
    """What makes two URLs reach the same service: the host (any port, as API Gateway answers on its
    own), or for this machine's loopback, where each port is a different server, the port too."""
    host = (parts.hostname or "").lower().rstrip(".")
    try:
        loopback = host in LOCAL_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return ("loopback", port_of(parts)) if loopback else (host, None)


def _refused(message: str) -> TargetRefused:
    return TargetRefused(message, field="target.url")
