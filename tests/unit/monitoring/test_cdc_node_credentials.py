"""A change-data-capture flow whose database user lives only on its data node (the flow names
none): the slot card, the lag monitor and the slot's drop on delete log in as that user, as the
flow's runs do — not as nobody."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from portal.flows import services as flow_services
from portal.monitoring import slots
from portal.orchestration.control.cdc import capture_of, source_connection
from portal.pipeline.cdc import pg as cdc_pg
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reader(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A database whose captured table belongs to a replication user of its own."""
    role = f"cdc_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(logical_pg, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN REPLICATION")
    try:
        with own_database(
            logical_pg,
            f"CREATE SCHEMA shop AUTHORIZATION {role}",
            "CREATE TABLE shop.customers (id int PRIMARY KEY, name text)",
            f"ALTER TABLE shop.customers OWNER TO {role}",
        ) as found:
            found["db"].execute(f'GRANT CREATE ON DATABASE "{found["name"]}" TO {role}')
            yield {**found, "role": role}
    finally:
        with psycopg.connect(logical_pg, autocommit=True) as admin:
            admin.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def flow(reader):
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": reader["url"], "user": reader["role"]}}
    )
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "/tmp/lake"}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc"},
        capabilities=[("shopdb", "lake")],
    )
    return flow_services.create_flow(
        owner=UserFactory(username="olivia"),
        data={
            "flow_group": "shop",
            "flow_name": "customers-log",
            "source": "shopdb",
            "destinations": ["lake"],
            "properties": {  # no source.conn.username: the node's user is the flow's
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
            },
            "paused": True,
        },
    )


def test_the_slot_is_watched_and_dropped_as_the_nodes_user(flow, reader):
    found = capture_of(flow)
    assert found is not None
    slot, props = found
    assert props.get("source.conn.username") == reader["role"]  # whoever reads them, the runs' login
    with source_connection(props, str(flow)) as conn:
        assert conn.info.user == reader["role"]
        cdc_pg.ensure(conn, slot, ["shop.customers"], "shopdb")

    report = slots.read(flow, fresh=True)
    assert report is not None and report.status not in ("unreachable", "lost"), report.message

    flow_services.delete_flow(flow)  # the slot is dropped once the deletion commits
    left = reader["db"].execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    assert left.fetchone() == (0,)
