"""Where a flow into a database delivered: the table as the flow names it, its rows, and a
preview of the table's first rows through Test connection's rules."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.topology import services
from tests.deliveries import jdbc_delivery
from tests.pg_server import scratch_database

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def warehouse():
    with scratch_database("outputs") as found:
        with found.connect() as db:
            db.execute("CREATE SCHEMA sales")
            db.execute("CREATE TABLE sales.orders_copy (id bigint, customer text)")
            db.execute("INSERT INTO sales.orders_copy VALUES (1, 'ann'), (2, 'bob'), (3, 'cy')")
        yield services.create_data_node(
            {"name": "warehouse", "kind": "jdbc", "properties": {"url": found.jdbc_url, "user": found.user}}
        )


def test_the_page_names_the_table_and_the_preview_reads_it(owner, warehouse):
    delivery = jdbc_delivery(warehouse, owner, table="sales.orders_copy", rows=3)
    browser = Client()
    browser.force_login(owner)

    page = browser.get(delivery.page).content.decode()
    assert "table <code>sales.orders_copy</code>" in page
    assert '<td data-label="Records">3</td>' in page

    response = browser.get(delivery.preview())
    assert response.status_code == 200
    assert response.context["preview"].columns == ["id", "customer"]
    assert response.context["preview"].rows == [["1", "ann"], ["2", "bob"], ["3", "cy"]]


def test_a_table_dropped_since_is_a_404_with_the_databases_words(owner, warehouse):
    delivery = jdbc_delivery(warehouse, owner, table="sales.dropped")
    browser = Client()
    browser.force_login(owner)

    response = browser.get(delivery.preview())

    assert response.status_code == 404
    assert "does not exist" in response.content.decode()
