"""An owner saves a flow that takes a whole schema: the compile preview lists the tables the
pattern matches now; a pattern matching nothing is refused at save, naming the field."""

from __future__ import annotations

import sqlite3

import pytest

from portal.flows.models import FlowConfig
from portal.topology import services as topology
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT, mysql

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        for table in ("orders_2024", "orders_2025", "customers"):
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, seq INTEGER)")
    topology.create_data_node({"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{path}"}})
    topology.create_data_node(
        {"name": "lake", "kind": "files", "properties": {"path": str(tmp_path / "lake")}}
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": "q"},
        capabilities=[("shop", "lake")],
    )


def body(tables: str, **extra: str) -> dict:
    return {
        "flowGroup": "shop",
        "flowName": "orders",
        "schedule": "0 * * * *",
        "source": "shop",
        "destinations": ["lake"],
        "properties": {"source.jdbc.tables": tables, "extract.delta.fields": "seq", **extra},
    }


def test_the_preview_lists_what_the_patterns_match_now(api, shop) -> None:
    preview = api.post("/api/flowconfigs/compile", body("orders_*,customers"), format="json").json()
    assert preview["status"] == "COMPILED", preview
    assert preview["jobs"][0]["datasets"] == ["orders_2024", "orders_2025", "customers"]  # as listed
    excluded = api.post(
        "/api/flowconfigs/compile",
        body("orders_*", **{"source.jdbc.tables.exclude": "*_2024"}),
        format="json",
    ).json()
    assert excluded["jobs"][0]["datasets"] == ["orders_2025"]
    assert "source.jdbc.tables matches 1 table(s) now: orders_2025" in excluded["message"]


def test_a_pattern_matching_no_table_is_refused_naming_the_field(api, shop) -> None:
    response = api.post("/api/flowconfigs", body("orders_*,refunds_*"), format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {
        "properties": [
            "source.jdbc.tables: the pattern 'refunds_*' matches no table of data node 'shop' (3 table(s) "
            "there; a pattern without a schema matches the default schema's tables)"
        ]
    }
    assert not FlowConfig.objects.exists()
    assert api.post("/api/flowconfigs", body("orders_*"), format="json").status_code == 201


def test_plain_table_names_are_not_looked_up_at_save(api, shop) -> None:
    """Only patterns need the catalog: a plain name is checked by the worker, as before."""
    assert api.post("/api/flowconfigs", body("not_there_yet"), format="json").status_code == 201


def test_a_mariadb_pattern_without_a_schema_matches_the_database_of_the_url(api, tmp_path) -> None:
    database = "flowport_flows_patterns"
    mysql(
        f"DROP DATABASE IF EXISTS {database}; CREATE DATABASE {database}; "
        f"CREATE TABLE {database}.orders_eu (id INT, seq INT); CREATE TABLE {database}.orders_us (id INT, seq INT)"
    )
    url = f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{database}"
    topology.create_data_node({"name": "shop", "kind": "jdbc", "properties": {"url": url, "user": "root"}})
    topology.create_data_node(
        {"name": "lake", "kind": "files", "properties": {"path": str(tmp_path / "lake")}}
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": "q"},
        capabilities=[("shop", "lake")],
    )
    try:
        # The server's own schemas are never the node's data: a pattern on them matches nothing.
        tables = "orders_*,mysql.user*"
        preview = api.post("/api/flowconfigs/compile", body(tables), format="json").json()
        assert preview["jobs"][0]["datasets"] == ["orders_eu", "orders_us"], preview
        assert preview["status"] == "FAILED"
        assert (
            "source.jdbc.tables: the pattern 'mysql.user*' matches no table of data node 'shop'"
            in preview["message"]
        )
    finally:
        mysql(f"DROP DATABASE IF EXISTS {database}")


def test_a_table_template_with_an_unknown_placeholder_is_refused_naming_the_key(api, shop, tmp_path) -> None:
    """``writer.jdbc.table=copy_{table}`` gives each table of the schema its own target; a misspelt
    placeholder would pour them all into one oddly named table, so the save refuses it."""
    topology.create_data_node(
        {"name": "warehouse", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{tmp_path / 'dw.db'}"}}
    )
    topology.create_executor(
        {"name": "copy", "technology": "spark-local", "spark_master": "local[2]", "queue": "q"},
        capabilities=[("shop", "warehouse")],
    )
    flow = {**body("orders_*", **{"writer.jdbc.table": "copy_{tabel}"}), "destinations": ["warehouse"]}
    response = api.post("/api/flowconfigs", flow, format="json")
    assert response.status_code == 400, response.content
    [message] = response.json()["properties"]
    assert "'writer.jdbc.table'" in message and "unknown placeholder '{tabel}' (known: {table})" in message
    flow["properties"]["writer.jdbc.table"] = "copy_{table}"
    assert api.post("/api/flowconfigs", flow, format="json").status_code == 201
