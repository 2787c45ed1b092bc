"""events.outbound: which addresses a user's webhook may reach, and the pinned
connection that makes the check hold (the attacker's stories are in
tests/security/test_attacker_outbound.py). The TLS stories run a real TLS
server on 127.0.0.2 with a certificate made here, reached by a name a small
resolver stand-in answers."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from portal.events import outbound


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - an address judged, not bound
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("100.64.0.1", "non-public"),  # carrier-grade NAT
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),  # a mapped public address is that public address
    ],
)
def test_each_kind_of_internal_address_is_named(address, kind):
    assert outbound.address_kind(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    "spelling", ["127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "::ffff:7f00:1"]
)
def test_every_spelling_of_loopback_is_judged_on_its_address(spelling):
    assert "127.0.0.1, a loopback address" in outbound.host_refusal(spelling, 80)


def test_a_name_that_does_not_resolve_is_left_to_delivery():
    assert outbound.host_refusal("nowhere.invalid", 443) is None


def test_the_operator_allows_names_domains_and_networks(settings):
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["localhost", ".corp.test", "10.20.0.0/16", "[::1]"]
    assert outbound.host_refusal("localhost", 80) is None
    assert outbound.host_refusal("10.20.3.4", 80) is None
    assert outbound.host_refusal("::1", 80) is None
    assert outbound.host_refusal("10.21.0.1", 80) == "it is (or resolves to) 10.21.0.1, a private address"
    assert outbound.host_refusal("127.0.0.1", 80) is not None  # localhost's name, not its address


def test_the_portals_own_names_are_refused_unless_allowed(settings):
    settings.SITE_URL = "https://flowport.example.org/"
    settings.ALLOWED_HOSTS = ["portal.example.org", ".example.net", "*"]
    assert outbound.host_refusal("flowport.example.org", 443) == "that is the portal itself"
    assert outbound.host_refusal("Portal.Example.org.", 443) == "that is the portal itself"
    assert outbound.host_refusal("hooks.example.net", 443) is None  # a domain pattern names no host
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["flowport.example.org"]
    assert outbound.host_refusal("flowport.example.org", 443) is None


def test_the_socket_is_refused_before_any_connection(settings):
    with pytest.raises(outbound.WebhookRefused, match=re.escape("169.254.169.254, a link-local address")):
        outbound.checked_socket("169.254.169.254", 80, 1)


# --- TLS through the pinned connection ------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.received.append((self.headers["Host"], json.loads(self.rfile.read(length))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "hook.pem", tmp_path / "hook.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


@contextmanager
def _tls_server(tmp_path: Path, name: str) -> Iterator[HTTPServer]:
    cert_file, key_file = _certificate(tmp_path, name)
    server = HTTPServer(("127.0.0.2", 0), _Receiver, bind_and_activate=True)
    server.received, server.server_names = [], []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    context.sni_callback = lambda _sock, server_name, _ctx: server.server_names.append(server_name)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda *args: None  # a refused handshake is the client's story
    server.certificate = cert_file
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def resolver(monkeypatch):
    """Names this test gives an address, the rest as the machine resolves them."""
    names: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        return real(names.get(host, host), port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def _post(url: str) -> int:
    request = urllib.request.Request(url, data=b'{"kind": "test"}', method="POST")  # noqa: S310 - https only here
    with outbound.pinned_opener().open(request, timeout=5) as response:
        return response.status


def test_https_keeps_the_urls_name_for_sni_and_the_certificate(tmp_path, settings, resolver, monkeypatch):
    """Connected to the checked address, the TLS handshake still names the URL's host (SNI)
    and checks the certificate against it; the HTTP Host header is the URL's too."""
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["127.0.0.2"]
    resolver.update({"hooks.tls.test": "127.0.0.2", "other.tls.test": "127.0.0.2"})
    with _tls_server(tmp_path, "hooks.tls.test") as server:
        port = server.server_port
        monkeypatch.setenv("SSL_CERT_FILE", str(server.certificate))  # trust this test's certificate
        assert _post(f"https://hooks.tls.test:{port}/hook") == 204
        assert server.server_names == ["hooks.tls.test"]
        assert server.received == [(f"hooks.tls.test:{port}", {"kind": "test"})]

        with pytest.raises(urllib.error.URLError, match=r"doesn't match|mismatch"):
            _post(f"https://other.tls.test:{port}/hook")  # same address, a name the certificate lacks
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            _post(f"https://hooks.tls.test:{port}/hook")  # a certificate nobody vouches for
        assert len(server.received) == 1
