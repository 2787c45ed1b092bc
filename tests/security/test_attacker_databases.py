"""Mallory, granted read on one data node and write on another, points them at databases she may
not reach: the portal's own database under every spelling that once walked
around the URL's text check, an Iceberg catalog on the any-address, and, on a MySQL/MariaDB server,
another team's database through qualified names. Each is refused at save where the save can tell
(400 naming the field), by Test connection and discovery, and on the worker, where the connection
itself decides: a job is FAILED before it reads or writes anything. The stories that run a job
past the worker's check commit their rows (transactional_db), as the job's heartbeat reads them from
a connection of its own.

A node is staff's to create, so a URL the save would refuse is written into the row directly (as an
old release or a hand-edited row would have it). "A spelling no text check knows yet" blinds the
URL-text check, so that what is tested is the decision on the open connection."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pymysql
import pytest
from django.db import connection

from portal.flows.models import FlowConfig
from portal.topology.models import DataNode
from tests.builders.api import api_client_for
from tests.builders.attacker_databases import LANDED, portal_db, run_the_world, spellings
from tests.builders.attacker_databases import blind_text_check as blind_text_check  # fixture
from tests.builders.world import World, files_under
from tests.factories import UserFactory

OWN_ONLY = "a MySQL/MariaDB node reaches only its own database"


SPELLINGS = [
    "the any-address 0.0.0.0",
    "an IPv4-mapped IPv6 address",
    "a percent-escaped name",
    "a PGDBNAME parameter",
    "host= and dbname= parameters",
    "no host at all",
]


def _staff():
    return api_client_for(UserFactory(username="stella", is_staff=True))


def _reading(world: World, url: str, table: str = "auth_user") -> None:
    """Mallory's node `landing` (read grant) now holds `url`; her flow reads `table` from it."""
    DataNode.objects.filter(name="landing").update(kind="jdbc", properties={"url": url})
    world.mallory_flow.properties = {
        "source.jdbc.tables": table,
        "extract.is.full": "true",
        "source.conn.username": connection.settings_dict["USER"] or "postgres",
        "writer.output.format": "csv",
    }
    world.mallory_flow.save(update_fields=["properties"])


def _portal_has_table(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        return cursor.fetchone()[0] is not None


# --- the portal's own database ------------------------------------------------------------------


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_staff_cannot_save_a_node_at_the_portals_database_under_any_spelling(world: World, spelling):
    body = {"name": "sneaky", "kind": "jdbc", "properties": {"url": spellings()[spelling]}}
    response = _staff().post("/api/datanodes", body, format="json")
    assert response.status_code == 400, response.content
    assert "url" in str(response.json()) and "portal's own database" in str(response.json())
    assert not DataNode.objects.filter(name="sneaky").exists()


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_flow_over_a_node_spelling_the_portals_database_reads_nothing(
    transactional_db, world: World, spelling
):
    _reading(world, spellings()[spelling])
    job = run_the_world(world)
    assert job.status == "FAILED" and "portal's own database" in job.message, job.message
    assert files_under(world.lake / "mal") == [] and not (world.tmp / "work" / "mal" / "grab").exists()


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_spelling_no_text_check_knows_is_refused_where_the_connection_lands(
    transactional_db, world: World, blind_text_check, spelling
):
    _reading(world, spellings()[spelling])
    job = run_the_world(world)
    assert job.status == "FAILED", job.message
    assert f"data node 'landing': {LANDED}" in job.message
    assert "security check" not in job.message  # the connection decided, not the URL's text
    assert files_under(world.lake / "mal") == []
    assert not [p for p in files_under(world.tmp / "work") if p.suffix == ".csv"]


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
def test_a_jdbc_writer_into_the_portals_database_creates_nothing_there(
    transactional_db, world: World, blind_text_check
):
    DataNode.objects.filter(name="lake").update(
        kind="jdbc", properties={"url": spellings()["a PGDBNAME parameter"]}
    )
    world.mallory_flow.properties = {
        "source.files.format": "csv",
        "writer.jdbc.table": "stolen_rows",
        "writer.jdbc.username": connection.settings_dict["USER"] or "postgres",
    }
    world.mallory_flow.save(update_fields=["properties"])
    job = run_the_world(world)
    assert job.status == "FAILED" and f"data node 'lake': {LANDED}" in job.message, job.message
    assert not _portal_has_table("stolen_rows") and not _portal_has_table("flowport_publish_marker")


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
@pytest.mark.parametrize("spelling", ["the any-address 0.0.0.0", "a PGDBNAME parameter", "no host at all"])
@pytest.mark.parametrize("blind", [False, True])
def test_test_connection_and_discovery_refuse_the_portals_database(world: World, request, spelling, blind):
    if blind:
        request.getfixturevalue("blind_text_check")
    DataNode.objects.filter(name="landing").update(kind="jdbc", properties={"url": spellings()[spelling]})
    user = {"user": connection.settings_dict["USER"] or "postgres"}
    tested = world.api().post("/api/datanodes/landing/test", user, format="json").json()
    assert (
        tested["ok"] is False
        and "Refused" in tested["message"]
        and "portal's own database" in tested["message"]
    )
    assert tested["schemas"] == []
    found = world.api().post("/api/datanodes/landing/discover", user, format="json").json()
    assert found["ok"] is False and "portal's own database" in found["message"] and found["datasets"] == []
    if blind:
        assert LANDED in tested["message"] and LANDED in found["message"]


# --- an Iceberg catalog on the any-address ------------------------------------------------------


def _catalog_uri() -> str:
    _host, port, name = portal_db()
    user = connection.settings_dict["USER"] or "postgres"
    return f"postgresql+psycopg://{user}@0.0.0.0:{port}/{name}"


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
def test_an_iceberg_catalog_on_the_any_address_is_refused_at_save(world: World):
    properties = {"catalog.uri": _catalog_uri(), "warehouse": str(world.tmp / "warehouse")}
    response = _staff().post(
        "/api/datanodes", {"name": "ice", "kind": "iceberg", "properties": properties}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "catalog.uri" in str(response.json()) and "portal's own database" in str(response.json())


@pytest.mark.postgres  # the portal's PostgreSQL database, spelled every way
def test_an_iceberg_catalog_in_the_portals_database_is_refused_and_writes_no_catalog_there(
    transactional_db, world: World, blind_text_check
):
    warehouse = world.tmp / "warehouse"
    DataNode.objects.filter(name="lake").update(
        kind="iceberg", properties={"catalog.uri": _catalog_uri(), "warehouse": str(warehouse)}
    )
    world.mallory_flow.properties = {"source.files.format": "csv"}
    world.mallory_flow.save(update_fields=["properties"])
    assert not _portal_has_table("iceberg_tables")
    job = run_the_world(world)
    assert job.status == "FAILED" and f"data node 'lake': {LANDED}" in job.message, job.message
    assert not _portal_has_table("iceberg_tables") and not _portal_has_table("iceberg_namespace_properties")
    assert files_under(warehouse) == []
    tested = world.api().post("/api/datanodes/lake/test", {}, format="json").json()
    assert tested["ok"] is False and LANDED in tested["message"]
    assert not _portal_has_table("iceberg_tables")


# --- another team's database on the same MySQL/MariaDB server -----------------------------------


@pytest.fixture
def mariadb(world: World) -> Iterator[tuple[str, str]]:
    """Mallory's team database and another team's, holding a secret, on the machine's MariaDB; her
    nodes `landing` (read) and `lake` (write) are her team's database."""
    mine, other = f"fp_att_mine_{os.getpid()}", f"fp_att_other_{os.getpid()}"
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    with admin.cursor() as cursor:
        for name in (mine, other):
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(f"CREATE TABLE `{mine}`.orders (id BIGINT PRIMARY KEY, amount INT)")
        cursor.execute(f"INSERT INTO `{mine}`.orders VALUES (1, 10)")  # noqa: S608 - our own names
        cursor.execute(f"CREATE TABLE `{other}`.secrets (id BIGINT PRIMARY KEY, token TEXT)")
        cursor.execute(f"INSERT INTO `{other}`.secrets VALUES (1, 'hunter2')")  # noqa: S608 - our own names
    url = f"jdbc:mariadb://127.0.0.1:3306/{mine}?user=root"
    for node in ("landing", "lake"):
        DataNode.objects.filter(name=node).update(kind="jdbc", properties={"url": url})
    yield mine, other
    with admin.cursor() as cursor:
        for name in (mine, other):
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    admin.close()


def _tables_of(database: str) -> list[str]:
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database)
    try:
        with admin.cursor() as cursor:
            cursor.execute("SHOW TABLES")
            return sorted(row[0] for row in cursor.fetchall())
    finally:
        admin.close()


def _cross(other: str) -> dict[str, dict[str, str]]:
    return {
        "a qualified name": {"source.jdbc.tables": f"{other}.secrets"},
        "every table of every database": {"source.jdbc.tables": "*.*"},
        "a pattern over database names": {
            "source.jdbc.tables": "orders",
            "source.jdbc.tables.exclude": "fp_att_other%.x",
        },
        "a target table in another database": {"writer.jdbc.table": f"{other}.stolen"},
        "a marker table in another database": {
            "writer.jdbc.table": "copy",
            "writer.jdbc.marker.table": f"{other}.marks",
        },
    }


CROSS = [
    "a qualified name",
    "every table of every database",
    "a pattern over database names",
    "a target table in another database",
    "a marker table in another database",
]


def _flow_properties(case: dict[str, str]) -> dict[str, str]:
    base = {"source.jdbc.tables": "orders", "extract.is.full": "true", "writer.jdbc.table": "orders_copy"}
    return {**base, **case}


@pytest.mark.parametrize("case", CROSS)
def test_another_databases_tables_are_refused_at_save_naming_the_key(world: World, mariadb, case):
    _mine, other = mariadb
    properties = _flow_properties(_cross(other)[case])
    response = world.post_flow(properties, flowName="cross")
    assert response.status_code == 400, response.content
    key = next(k for k, v in _cross(other)[case].items() if "." in v or "*" in v or "%" in v)
    assert key in str(response.json()) and OWN_ONLY in str(response.json())
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="cross").exists()


@pytest.mark.parametrize("case", CROSS)
def test_another_databases_tables_are_neither_read_nor_written_on_the_worker(
    transactional_db, world: World, mariadb, case
):
    mine, other = mariadb
    world.mallory_flow.properties = _flow_properties(_cross(other)[case])
    world.mallory_flow.save(update_fields=["properties"])
    job = run_the_world(world)
    assert job.status == "FAILED" and OWN_ONLY in job.message, job.message
    assert _tables_of(other) == ["secrets"]  # nothing created there
    assert _tables_of(mine) == ["orders"]  # nor staged here: the job stopped before any write


def test_discovery_lists_only_the_nodes_own_database(world: World, mariadb):
    mine, other = mariadb
    tested = world.api().post("/api/datanodes/landing/test", {}, format="json").json()
    assert tested["ok"] and tested["schemas"] == [mine]
    found = world.api().post("/api/datanodes/landing/discover", {}, format="json").json()
    assert found["ok"] and [d["name"] for d in found["datasets"]] == [f"{mine}.orders"]
    assert other not in str(found)


def test_a_mariadb_node_without_a_database_is_refused_at_save_and_reaches_none(world: World, mariadb):
    body = {
        "name": "server",
        "kind": "jdbc",
        "properties": {"url": "jdbc:mariadb://127.0.0.1:3306/?user=root"},
    }
    response = _staff().post("/api/datanodes", body, format="json")
    assert response.status_code == 400 and "names no database" in str(response.json()), response.content
    DataNode.objects.filter(name="landing").update(
        properties={"url": "jdbc:mariadb://127.0.0.1:3306/?user=root"}
    )
    found = world.api().post("/api/datanodes/landing/discover", {}, format="json").json()
    assert found["ok"] is False and "no database" in found["message"] and found["datasets"] == []
