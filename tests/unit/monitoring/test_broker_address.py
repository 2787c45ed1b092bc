"""The dashboard names the broker to staff only, by scheme and host: never its password,
nor the absolute path of an embedded broker's file on the portal's host."""

from __future__ import annotations

import pytest

from portal.monitoring import health
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@10.0.0.5:6379/11", "redis://10.0.0.5:6379"),
        ("amqp://flowport:s3cret@rabbit.internal//", "amqp://rabbit.internal"),
        ("sqla+sqlite:////srv/flowport/var/broker.sqlite3", "sqla+sqlite (a file on the portal's host)"),
    ],
)
def test_the_broker_is_named_by_scheme_and_host(url, shown):
    assert health.broker_address(url) == shown


def test_only_staff_see_the_brokers_address_on_the_dashboard(client, settings, tmp_path):
    broker_file = tmp_path / "broker.sqlite3"
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{broker_file}"
    health.check_infrastructure(force=True)
    client.force_login(UserFactory(username="olivia"))
    html = client.get("/monitoring/").content.decode()
    assert "Broker and Spark masters" in html and str(tmp_path) not in html
    assert "sqla+sqlite" not in html
    client.force_login(UserFactory(username="stella", is_staff=True))
    html = client.get("/monitoring/").content.decode()
    assert "sqla+sqlite (a file on the portal&#x27;s host)" in html and str(tmp_path) not in html
