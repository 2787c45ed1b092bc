"""The first rows of a JDBC node's table, for the preview of what an execution delivered: a
bounded SELECT through Test connection's rules (the node's URL judged, the connection judged
where it landed, the node's own account), never more than 20 rows, never a name that is not a
plain table name, and never the portal's own database."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.topology import connections, services
from portal.topology.models import DataNode
from tests.pg_server import scratch_database

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def shop():
    with scratch_database("preview") as found:
        with found.connect() as db:
            db.execute("CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text, paid boolean)")
            db.execute(
                "INSERT INTO public.orders SELECT i, 'customer ' || i, i % 2 = 0 FROM generate_series(1, 50) i"
            )
            db.execute("CREATE SCHEMA sales")
            db.execute("CREATE TABLE sales.refunds (id int)")
        node = services.create_data_node(
            {"name": "shop", "kind": "jdbc", "properties": {"url": found.jdbc_url, "user": found.user}}
        )
        yield node


def test_the_first_rows_of_a_table_at_most_twenty(shop):
    found = connections.preview_table(shop, "orders", 500)

    assert found.columns == ["id", "customer", "paid"]
    assert len(found.rows) == 20
    assert found.rows[0][1].startswith("customer ")


def test_a_schema_qualified_table_and_an_empty_one(shop):
    assert connections.preview_table(shop, "sales.refunds").rows == []


@pytest.mark.parametrize(
    "name",
    ["orders; DROP TABLE orders", 'orders" --', "a.b.c", "pg_catalog.pg_authid where 1=1", "../orders", ""],
)
def test_a_name_that_is_not_a_plain_table_name_is_refused_before_connecting(shop, name):
    with pytest.raises(connections.PreviewRefused, match="not a table name"):
        connections.preview_table(shop, name)


def test_a_missing_table_answers_with_the_databases_words(shop):
    with pytest.raises(connections.PreviewRefused, match="does not exist"):
        connections.preview_table(shop, "gone")


def test_the_portals_own_database_is_never_read(db):
    own = connection.settings_dict
    url = f"jdbc:postgresql://{own['HOST'] or 'localhost'}:{own['PORT'] or 5432}/{own['NAME']}"
    # Saved behind the checks' back (as by an old release): DataNode.clean would refuse it.
    sneaky = DataNode.objects.create(name="sneaky", kind="jdbc", properties={"url": url, "user": "postgres"})

    with pytest.raises(connections.PreviewRefused, match="Refused"):
        connections.preview_table(sneaky, "auth_user")
