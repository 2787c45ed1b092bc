"""Mallory, an ordinary account, points her flow subscription's webhook at the
inside of the network — loopback under every spelling, the cloud metadata
address, the portal's own admin pages — to make the portal's sender call it
for her. Each attempt is refused when she saves it (400 naming the field) and
again at delivery, on the address the sender would connect to: a real HTTP
server listening on 127.0.0.1 receives nothing. Only an operator's allowance
(MONITORING_WEBHOOK_INTERNAL_HOSTS) opens an internal host."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from portal.events import outbound, sinks
from portal.events.models import Event
from portal.events.services import raise_event
from portal.monitoring.models import Subscription
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db

# How Mallory spells an internal address; {port} is the port of the server listening on 127.0.0.1.
SPELLINGS = [
    "http://127.0.0.1:{port}/hook",
    "http://0.0.0.0:{port}/hook",
    "http://[::1]:{port}/hook",
    "http://2130706433:{port}/hook",
    "http://0x7f.1:{port}/hook",
    "http://0177.0.0.1:{port}/hook",
    "http://127.1:{port}/hook",
    "http://[::ffff:127.0.0.1]:{port}/hook",
    "http://[::ffff:7f00:1]:{port}/hook",
    "http://localhost:{port}/admin/",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://10.0.0.1/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
]


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.received.append((self.headers["Host"], json.loads(self.rfile.read(length))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def _serving(address: str, port: int = 0) -> Iterator[HTTPServer]:
    server = HTTPServer((address, port), _Receiver)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def inside():
    """A service inside the network: it listens on loopback and must hear nothing from Mallory."""
    with _serving("127.0.0.1") as server:
        yield server


@pytest.fixture
def mallory(db):
    return UserFactory(username="mallory")


@pytest.fixture
def flow(mallory):
    return FlowConfigFactory(flow_group="mal", flow_name="grab", owner=mallory, properties={})


def _failure(flow) -> Event:
    return raise_event(
        "execution.failed",
        "mal/grab failed",
        severity=Event.Severity.ERROR,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        execution_id=1,
    )


def _subscribe(mallory, url: str):
    body = {"flowGroup": "mal", "flowName": "grab", "email": False, "webhookUrl": url}
    return api_client_for(mallory).post("/api/subscriptions", body, format="json")


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_internal_webhook_is_refused_when_saved(mallory, flow, inside, spelling):
    response = _subscribe(mallory, spelling.format(port=inside.server_port))
    assert response.status_code == 400, response.content
    reason = response.json()["webhookUrl"][0]
    assert "Webhooks may not go to" in reason and "MONITORING_WEBHOOK_INTERNAL_HOSTS" in reason
    assert not Subscription.objects.exists()


def test_the_subscription_page_names_the_field_too(client, mallory, flow, inside):
    client.force_login(mallory)
    response = client.post(
        "/monitoring/flows/mal/grab/subscription/",
        {"on_failure": "on", "webhook_url": f"http://2130706433:{inside.server_port}/hook"},
    )
    assert response.status_code == 400
    assert "127.0.0.1, a loopback address" in response.context["form"].errors["webhook_url"][0]
    assert not Subscription.objects.exists()


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_internal_webhook_saved_anyway_is_not_called_at_delivery(mallory, flow, inside, spelling):
    """A row that got past the save (written before the rule, or a name whose DNS answer
    changed since): the sender refuses it on the address it resolves, and the server on
    127.0.0.1 hears nothing."""
    Subscription.objects.create(
        user=mallory, flow=flow, by_email=False, webhook_url=spelling.format(port=inside.server_port)
    )
    event = _failure(flow)
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert outbound.ADVICE in event.delivery_error, event.delivery_error
    assert not [name for name in event.delivered_to if name.endswith(":webhook")]
    assert inside.received == []


def test_the_portals_own_site_is_refused_by_name(mallory, flow, settings):
    settings.SITE_URL = "https://flowport.example.org"
    response = _subscribe(mallory, "https://flowport.example.org/admin/auth/user/")
    assert response.status_code == 400
    assert "that is the portal itself" in response.json()["webhookUrl"][0]
    Subscription.objects.create(
        user=mallory, flow=flow, by_email=False, webhook_url="https://FlowPort.example.org./admin/"
    )
    event = _failure(flow)
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert "that is the portal itself" in event.delivery_error


def test_the_portals_own_address_is_refused_even_when_the_operator_allows_private_ones(
    mallory, flow, settings
):
    """This machine's own name resolves to an address of the portal: allowing private
    networks in general does not open the portal itself, only naming it does."""
    own = socket.gethostbyname(socket.gethostname())
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, own]
    response = _subscribe(mallory, f"http://{socket.gethostname()}:8000/admin/")
    assert response.status_code == 400
    assert "the portal itself" in response.json()["webhookUrl"][0]


def test_dns_rebinding_meets_the_address_that_was_checked(mallory, flow, settings, monkeypatch):
    """The name answers a trusted address (127.0.0.2, allowed by the operator) the first time
    and 127.0.0.1 every time after. The sender asks once, checks that answer and connects to
    it: the trusted server receives the event, with the URL's own Host, and the service on
    127.0.0.1 nothing. A sender that checked the name and then let urllib resolve it again
    would have called 127.0.0.1."""
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["127.0.0.2"]
    real = socket.getaddrinfo
    answers = iter(["127.0.0.2"])

    def rebinding(host, port, *args, **kwargs):
        if host == "hooks.rebind.test":
            return real(next(answers, "127.0.0.1"), port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with _serving("127.0.0.2") as trusted, _serving("127.0.0.1", trusted.server_port) as inside:
        url = f"http://hooks.rebind.test:{trusted.server_port}/hook"
        Subscription.objects.create(user=mallory, flow=flow, by_email=False, webhook_url=url)
        _failure(flow)
        assert sinks.deliver_pending_events() == 1
        assert [host for host, _body in trusted.received] == [f"hooks.rebind.test:{trusted.server_port}"]
        assert inside.received == []
        # The next event: DNS now answers 127.0.0.1 only, which is refused.
        second = _failure(flow)
        assert sinks.deliver_pending_events() == 0
        second.refresh_from_db()
        assert "127.0.0.1, a loopback address" in second.delivery_error
        assert inside.received == [] and len(trusted.received) == 1


def test_a_host_the_operator_allows_is_called(mallory, flow, inside, settings):
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["127.0.0.1"]
    response = _subscribe(mallory, f"http://127.0.0.1:{inside.server_port}/hook")
    assert response.status_code == 201, response.content
    _failure(flow)
    assert sinks.deliver_pending_events() == 1
    assert [body["kind"] for _host, body in inside.received] == ["execution.failed"]


def test_an_allowed_name_is_allowed_by_name_only(mallory, flow, inside, settings):
    """Allowing `localhost` opens that name, not 127.0.0.1 under another spelling."""
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["localhost"]
    assert _subscribe(mallory, f"http://localhost:{inside.server_port}/hook").status_code == 201
    Subscription.objects.all().delete()
    assert _subscribe(mallory, f"http://2130706433:{inside.server_port}/hook").status_code == 400
