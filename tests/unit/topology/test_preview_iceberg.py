"""The first rows of an Iceberg node's table, for the preview of what an execution delivered: a
scan limited to 20 rows through the node's catalog, judged as Test connection judges it; a name
that is not namespace.table, or a table that is not there, answers why. An execution into it names
the table and its owner previews it; someone who may not change the flow may not."""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.test import Client

from portal.topology import connections, services
from tests.deliveries import iceberg_delivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def lakehouse(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    from portal.pipeline.destinations.iceberg import CATALOG_NAME

    uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh"
    warehouse.mkdir()
    catalog = SqlCatalog(CATALOG_NAME, uri=uri, warehouse=f"file://{warehouse}")
    catalog.create_namespace("sales")
    rows = pa.table({"id": pa.array(range(30), pa.int64()), "city": pa.array([f"c{i}" for i in range(30)])})
    catalog.create_table("sales.orders", schema=rows.schema).append(rows)
    return services.create_data_node(
        {
            "name": "lakehouse",
            "kind": "iceberg",
            "properties": {"catalog.uri": uri, "warehouse": str(warehouse)},
        }
    )


def test_the_first_rows_of_an_iceberg_table_at_most_twenty(lakehouse):
    found = connections.preview_iceberg(lakehouse, "sales.orders", 100)

    assert found.columns == ["id", "city"]
    assert len(found.rows) == 20 and found.rows[0] == (0, "c0")


@pytest.mark.parametrize("name", ["orders", "sales.orders.x", "sales.orders; drop", "../sales.orders"])
def test_a_name_that_is_not_namespace_dot_table_is_refused(lakehouse, name):
    with pytest.raises(connections.PreviewRefused, match="not an Iceberg table name"):
        connections.preview_iceberg(lakehouse, name)


def test_an_execution_into_it_names_the_table_and_previews_it(lakehouse, owner, outsider):
    delivery = iceberg_delivery(lakehouse, owner, group="sales", table="orders")
    browser = Client()
    browser.force_login(owner)

    page = browser.get(delivery.page).content.decode()
    assert "Iceberg table <code>sales.orders</code>" in page
    response = browser.get(delivery.preview())
    assert response.status_code == 200
    assert response.context["preview"].rows[1] == ["1", "c1"]

    browser.force_login(outsider)
    assert browser.get(delivery.preview()).status_code == 403


def test_a_table_that_is_not_there_says_so(lakehouse):
    with pytest.raises(connections.PreviewRefused, match="NoSuchTable"):
        connections.preview_iceberg(lakehouse, "sales.gone")
