"""Where a user's webhook may go. A subscription's webhook URL is typed by any
signed-in user and called by the portal's own processes, so without a rule it
is a blind request forgery from inside the network: the metadata service at
169.254.169.254, a database's HTTP port on 127.0.0.1, the portal's admin pages.

The decision is on the addresses a host resolves to, never on how the URL
spells it, so `2130706433`, `0x7f.1`, `0177.0.0.1` and `[::ffff:127.0.0.1]`
are all 127.0.0.1 here. Loopback, private, shared, link-local, unspecified,
multicast and reserved addresses (and IPv4 addresses inside IPv6 ones) are
refused, and so are the portal's own addresses and names (SITE_URL, the exact
names of ALLOWED_HOSTS, this machine's name), unless the operator allows a
host or network in MONITORING_WEBHOOK_INTERNAL_HOSTS.

A check at save time can only be a hint (DNS answers can change). What holds
is `PinnedHTTPConnection`: it resolves the host once, checks every address,
and connects to a checked address itself, while the Host header, TLS server
name and certificate check still use the URL's host. A name that answers a
public address to the check and 127.0.0.1 to the connection (DNS rebinding)
therefore never reaches 127.0.0.1.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import urllib.request
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# IPv6 prefixes that carry an IPv4 address in their last 32 bits (RFC 6052 NAT64).
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


class WebhookRefused(ValueError):
    """A webhook's host is (or resolves to) an address the portal does not call."""


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: mapped (::ffff:a.b.c.d),
    6to4, Teredo and NAT64 all reach an IPv4 host."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in network for network in _NAT64):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def address_kind(address: IPAddress) -> str | None:
    """Why an address is not one the portal calls on a user's behalf
    ("loopback", "private", …); None for a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # the IPv4 host itself, whatever the spelling
            return address_kind(address.ipv4_mapped)
        for inner in _embedded_ipv4(address):
            kind = address_kind(inner)
            if kind is not None:
                return kind
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-public", not address.is_global),
    )
    return next((kind for kind, hit in checks if hit), None)


def _host_name(host: str) -> str:
    return host.strip("[]").lower().rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _parse_entries(entries: Iterable[str]) -> tuple[list[str], list[IPNetwork]]:
    names: list[str] = []
    networks: list[IPNetwork] = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.append(entry.lower().rstrip("."))
    return names, networks


def _name_matches(host: str, names: Iterable[str]) -> bool:
    for entry in names:
        if entry.startswith("."):
            if host == entry[1:] or host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


def _plain(address: IPAddress) -> IPAddress:
    """::ffff:a.b.c.d compares as a.b.c.d, so an allowance of 127.0.0.1 covers both spellings."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _allowances() -> tuple[list[str], list[IPNetwork]]:
    return _parse_entries(getattr(settings, "MONITORING_WEBHOOK_INTERNAL_HOSTS", []))


def _portal_names() -> set[str]:
    """The names the portal answers to: SITE_URL's host, the exact names of
    ALLOWED_HOSTS, and this machine's own name."""
    names = {_host_name(urlsplit(settings.SITE_URL).hostname or "")}
    names.update(
        _host_name(entry) for entry in settings.ALLOWED_HOSTS if entry != "*" and not entry.startswith(".")
    )
    names.add(_host_name(socket.gethostname()))
    return {name for name in names if name}


def _resolve(host: str, port: int) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    """(family, socket address) for every address of the host, in the resolver's order."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [(family, sockaddr) for family, _type, _proto, _name, sockaddr in answers]


def _portal_addresses() -> set[IPAddress]:
    found: set[IPAddress] = set()
    for name in _portal_names():
        try:
            found.update(_plain(ipaddress.ip_address(sockaddr[0])) for _f, sockaddr in _resolve(name, 0))
        except (OSError, UnicodeError, ValueError):
            continue  # a name that does not resolve (here) has no address to protect
    return found


def _refusal(host: str, addresses: list[IPAddress]) -> str | None:
    """Why the portal may not call this host at these addresses; None when it may."""
    name = _host_name(host)
    names, networks = _allowances()
    if _name_matches(name, names):
        return None
    outside = [address for address in addresses if not any(_plain(address) in net for net in networks)]
    if addresses and not outside:
        return None  # the operator allowed every one of these addresses
    if name in _portal_names() and not _is_address(name):  # an address is judged as one, below
        return "that is the portal itself"
    for address in outside:
        kind = address_kind(address)
        if kind is not None:
            return f"it is (or resolves to) {_plain(address)}, a {kind} address"
    own = _portal_addresses() if outside else set()
    for address in outside:
        if _plain(address) in own:
            return f"it resolves to {_plain(address)}, an address of the portal itself"
    return None


ADVICE = (
    "webhooks go to public addresses only (the operator may allow an internal host "
    "in MONITORING_WEBHOOK_INTERNAL_HOSTS)"
)


def host_refusal(host: str, port: int) -> str | None:
    """The check at save time, best effort: a host that does not resolve now is
    left to the check at delivery (DNS may answer differently then anyway).
    The reason says what `host` is ("it resolves to 10.0.0.5, a private address")."""
    try:
        addresses = [ipaddress.ip_address(sockaddr[0]) for _f, sockaddr in _resolve(host, port)]
    except (OSError, UnicodeError, ValueError):
        addresses = []
    return _refusal(host, addresses)


def checked_socket(host: str, port: int, timeout: object) -> socket.socket:
    """A socket connected to an address of `host` that passed the check: every
    address is checked before any is tried, then they are tried in order."""
    reason = _refusal(host, [])  # the portal's own names, before asking DNS anything
    if reason:
        raise WebhookRefused(f"{host}: {reason}; {ADVICE}")
    try:
        answers = _resolve(host, port)
    except (OSError, UnicodeError) as error:
        raise OSError(f"{host} does not resolve: {error}") from error
    reason = _refusal(host, [ipaddress.ip_address(sockaddr[0]) for _f, sockaddr in answers])
    if reason:
        raise WebhookRefused(f"{host}: {reason}; {ADVICE}")
    last: OSError | None = None
    for family, sockaddr in answers:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            # http.client passes its "no timeout given" sentinel through; that is the default.
            sock.settimeout(timeout if isinstance(timeout, int | float) else socket.getdefaulttimeout())
            sock.connect(sockaddr)
        except OSError as error:
            sock.close()
            last = error
            continue
        return sock
    raise last or OSError(f"{host} has no address")


class PinnedHTTPConnection(http.client.HTTPConnection):
    """http.client's connection, connected by `checked_socket` (no proxy)."""

    def connect(self) -> None:
        self.sock = checked_socket(self.host, self.port, self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedHTTPSConnection(http.client.HTTPSConnection, PinnedHTTPConnection):
    """HTTPSConnection.connect wraps what PinnedHTTPConnection.connect opened,
    with the URL's host as server name and for the certificate check."""


class _PinnedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(PinnedHTTPConnection, req)


class _PinnedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(PinnedHTTPSConnection, req, context=ssl.create_default_context())


def pinned_opener(*handlers: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """A urllib opener whose http and https connections go through `checked_socket`.
    No proxy: a proxy would resolve the name itself, after the check."""
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}), _PinnedHTTPHandler(), _PinnedHTTPSHandler(), *handlers
    )
