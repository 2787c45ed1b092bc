"""Test connection and discovery on a data node's page: real folders with
CSV, JSON lines and Parquet files, a real PostgreSQL database of the test's
own and a SQLite file. Only a user granted the node may ask; the portal's own
database and anything outside a node's root stay out of reach."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest
from django.db import connection

from portal.pipeline.usernode import FLOW_LOGIN_REFUSED
from portal.topology import grants, services
from portal.topology.models import DataNode
from tests.factories import UserFactory
from tests.pg_server import scratch_database

pytestmark = pytest.mark.django_db


@pytest.fixture
def granted(owner):
    """olivia, holding a read grant on every node the test makes with `node`."""
    return owner


@pytest.fixture
def node(granted):
    def make(name: str, kind: str, **properties: str) -> DataNode:
        made = services.create_data_node({"name": name, "kind": kind, "properties": properties})
        grants.set_grants(made, [{"role": "read", "user": granted.username}])
        return made

    return make


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "landing"
    (root / "orders").mkdir(parents=True)
    (root / "orders" / "2026-01.csv").write_text("id,customer,amount\n1,ann,9.5\n")
    (root / "events.jsonl").write_text(
        json.dumps({"id": 1, "at": "2026-01-01", "ok": True, "score": 0.5}) + "\n"
    )
    pq.write_table(
        pa.table({"id": pa.array([1], pa.int64()), "updated": pa.array([0], pa.timestamp("ms"))}),
        root / "snapshot.parquet",
    )
    (root / "README.txt").write_text("not data")
    outside = tmp_path / "secret.csv"
    outside.write_text("password\nhunter2\n")
    (root / "leak.csv").symlink_to(outside)
    return root


def test_a_granted_user_tests_a_files_node_and_discovers_its_files(client, granted, node, folder):
    node("landing", "files", path=str(folder))
    client.force_login(granted)
    page = client.get("/topology/datanodes/landing/").content.decode()
    assert "Test connection" in page and "Discover tables and files" in page

    verdict = client.post("/topology/datanodes/landing/test/").content.decode()
    assert "Connection works" in verdict and "exists and is readable (5 entries)" in verdict

    found = client.post("/topology/datanodes/landing/discover/")
    datasets = {d.name: d for d in found.context["found"].datasets}
    assert sorted(datasets) == ["events.jsonl", "orders/2026-01.csv", "snapshot.parquet"]  # no link out
    assert [(c.name, c.type) for c in datasets["orders/2026-01.csv"].columns] == [
        ("id", "bigint"),
        ("customer", "string"),
        ("amount", "double"),
    ]
    assert [(c.name, c.type) for c in datasets["events.jsonl"].columns] == [  # by name, as Spark
        ("at", "string"),
        ("id", "bigint"),
        ("ok", "boolean"),
        ("score", "double"),
    ]
    orders = datasets["orders/2026-01.csv"]
    assert orders.watermark_source == "file_modification_time" and orders.watermark_candidates == []
    assert orders.modified == os.stat(folder / "orders" / "2026-01.csv").st_mtime
    assert "Watermark: the file's modification time" in found.content.decode()
    assert [(c.name, c.type) for c in datasets["snapshot.parquet"].columns] == [
        ("id", "int64"),
        ("updated", "timestamp[ms]"),
    ]
    assert [c.name for c in datasets["snapshot.parquet"].watermark_columns] == ["id", "updated"]
    snapshot = {c.name: c.watermark_verdict for c in datasets["snapshot.parquet"].columns}
    assert snapshot == {"id": "no", "updated": "no: a timestamp; files follow their modification time"}
    assert "hunter2" not in found.content.decode() and "leak.csv" not in found.content.decode()


def test_a_missing_folder_fails_with_the_systems_own_message(client, granted, node, tmp_path):
    node("gone", "files", path=str(tmp_path / "nowhere"))
    client.force_login(granted)
    verdict = client.post("/topology/datanodes/gone/test/").content.decode()
    assert "Connection failed" in verdict and "No such file or directory" in verdict
    assert "No such file or directory" in client.post("/topology/datanodes/gone/discover/").content.decode()


def test_nobody_without_a_grant_sees_tests_or_discovers_a_node(client, node, folder, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    node("landing", "files", path=str(folder))
    stranger = UserFactory(username="stranger")
    client.force_login(stranger)
    page = client.get("/topology/datanodes/landing/")  # the page names whom to ask
    assert page.status_code == 200 and "Request access" in page.content.decode()
    assert 'id="connection-form"' not in page.content.decode()
    assert client.post("/topology/datanodes/landing/test/").status_code == 403
    assert client.post("/topology/datanodes/landing/discover/").status_code == 403
    client.logout()
    assert client.post("/topology/datanodes/landing/test/").status_code == 302  # to the login page


def test_a_node_reaching_the_portals_own_database_is_never_connected_to(client, granted):
    own = connection.settings_dict
    url = f"jdbc:postgresql://{own['HOST'] or 'localhost'}:{own['PORT'] or 5432}/{own['NAME']}"
    if connection.vendor == "sqlite":  # the embedded portal's file
        url = f"jdbc:sqlite:{own['NAME']}"
    # Saved behind the checks' back (as by an old release): DataNode.clean would refuse it.
    sneaky = DataNode.objects.create(name="sneaky", kind="jdbc", properties={"url": url})
    grants.set_grants(sneaky, [{"role": "read", "user": granted.username}])
    client.force_login(granted)
    for action in ("test", "discover"):
        body = client.post(
            f"/topology/datanodes/sneaky/{action}/", {"test_user": "postgres"}
        ).content.decode()
        assert "Refused" in body and "the portal&#x27;s own database" in body
        assert "Schemas" not in body and "table(s)" not in body


@pytest.fixture
def warehouse():
    """A PostgreSQL database of this test's own (tests.pg_server)."""
    with scratch_database("warehouse") as found:
        with found.connect() as db:
            db.execute("CREATE SCHEMA sales")
            db.execute("CREATE TABLE sales.orders (id bigint PRIMARY KEY, updated_at timestamp, note text)")
            db.execute("CREATE TABLE public.customers (name text, joined date)")
            db.execute(
                "CREATE TABLE public.ledger (region text, entry integer, seq bigint GENERATED ALWAYS AS "
                "IDENTITY, batch serial, booked date, amount numeric(12,2), PRIMARY KEY (region, entry))"
            )
            db.execute(
                "CREATE TABLE public.points (id uuid PRIMARY KEY, spot point, lasted interval,"
                " stamps timestamp[], ids bigint[], stay daterange, span int8range)"
            )
        yield found.jdbc_url, found.user


def test_a_node_with_an_account_of_its_own_is_tested_with_it_whatever_is_typed(
    client, granted, node, warehouse
):
    """A user of a node does not choose who the database takes them for (issue #46): typing the
    server's superuser on a node whose account is someone else's tests that account."""
    url, user = warehouse
    node("warehouse", "jdbc", url=url, driver="org.postgresql.Driver", user="nobody_here")
    client.force_login(granted)
    for action in ("test", "discover"):
        body = client.post(f"/topology/datanodes/warehouse/{action}/", {"test_user": user}).content.decode()
        assert "nobody_here" in body, body[-2000:]  # the node's own account was refused by the server
        assert "sales" not in body


def test_a_jdbc_node_lists_its_schemas_and_its_tables_with_columns_and_types(
    client, granted, node, warehouse
):
    url, user = warehouse
    node("warehouse", "jdbc", url=url, driver="org.postgresql.Driver", user=user)  # its own account
    client.force_login(granted)
    verdict = client.post("/topology/datanodes/warehouse/test/").content.decode()
    assert "Connection works" in verdict and "<code>public</code>, <code>sales</code>" in verdict

    response = client.post("/topology/datanodes/warehouse/discover/")
    tables = {d.name: d for d in response.context["found"].datasets}
    assert sorted(tables) == ["public.customers", "public.ledger", "public.points", "sales.orders"]
    assert [(c.name, c.type) for c in tables["sales.orders"].columns] == [
        ("id", "bigint"),
        ("updated_at", "timestamp without time zone"),
        ("note", "text"),
    ]
    orders = tables["sales.orders"]
    assert orders.primary_key == ["id"]
    assert [(c.name, c.candidate) for c in orders.watermark_candidates] == [
        ("id", "integer primary key"),
        ("updated_at", "timestamp"),
    ]
    assert [c.name for c in tables["public.customers"].watermark_columns] == ["joined"]
    assert tables["public.customers"].primary_key == []
    ledger = tables["public.ledger"]  # a two-column key; identity and serial columns
    assert [c.type for c in ledger.columns][-1] == "numeric(12,2)"  # with its precision and scale
    assert ledger.primary_key == ["region", "entry"]
    assert [(c.name, c.candidate) for c in ledger.watermark_candidates] == [
        ("seq", "identity column"),
        ("batch", "identity column"),
        ("booked", "date"),
    ]
    assert [c.name for c in ledger.watermark_columns] == ["seq", "batch", "booked", "entry"]  # no money
    assert {c.name: c.watermark_verdict for c in ledger.columns} == {
        "region": "no",
        "entry": "no",  # an integer, but no id: nothing says it grows
        "seq": "yes: identity column",
        "batch": "yes: identity column",
        "booked": "yes: date",
        "amount": "no",
    }
    points = tables["public.points"]  # point, interval, arrays and ranges: not ordered, no cursor
    assert [c.type for c in points.columns][-4:] == [
        "timestamp without time zone[]",
        "bigint[]",
        "daterange",
        "int8range",
    ]
    assert points.watermark_columns == [] and points.watermark_candidates == []
    page = response.content.decode()
    assert "Primary key: <code>region</code>, <code>entry</code>" in page
    assert '<td data-label="Watermark?">yes: identity column</td>' in page
    assert "suitable" not in page and "candidate (" not in page


def test_a_wrong_user_or_a_dead_port_answers_in_seconds_with_the_drivers_message(
    client, granted, node, warehouse
):
    url, _user = warehouse
    node("warehouse", "jdbc", url=url)
    node("dead", "jdbc", url="jdbc:postgresql://127.0.0.1:1/nothing")
    client.force_login(granted)
    verdict = client.post(
        "/topology/datanodes/warehouse/test/", {"test_user": "nobody_here"}
    ).content.decode()
    assert "Connection failed" in verdict and "role &quot;nobody_here&quot; does not exist" in verdict
    started = time.monotonic()
    verdict = client.post("/topology/datanodes/dead/test/").content.decode()
    assert "Connection failed" in verdict and "OperationalError" in verdict and "refused" in verdict
    assert time.monotonic() - started < 10


def test_a_sqlite_node_is_discovered_read_only(client, granted, node, tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (sku TEXT, stock INTEGER, changed TIMESTAMP)")
    node("shop", "jdbc", url=f"jdbc:sqlite:{path}")
    client.force_login(granted)
    assert "Connection works" in client.post("/topology/datanodes/shop/test/").content.decode()
    found = client.post("/topology/datanodes/shop/discover/").context["found"]
    assert [(d.name, [(c.name, c.type) for c in d.columns]) for d in found.datasets] == [
        ("items", [("sku", "TEXT"), ("stock", "INTEGER"), ("changed", "TIMESTAMP")])
    ]
    missing = DataNode.objects.create(
        name="missing", kind="jdbc", properties={"url": "jdbc:sqlite:/nope/x.db"}
    )
    grants.set_grants(missing, [{"role": "read", "user": granted.username}])
    assert "unable to open database file" in client.post("/topology/datanodes/missing/test/").content.decode()


def test_discovery_of_a_big_tree_stops_early_and_says_so(client, granted, node, tmp_path, monkeypatch):
    from portal.pipeline.discovery import shapes

    root = tmp_path / "big"
    for index in range(6):
        (root / f"part-{index}").mkdir(parents=True)
        (root / f"part-{index}" / "data.csv").write_text("id\n1\n")
    node("big", "files", path=str(root))
    monkeypatch.setattr(shapes, "DISCOVERY_MAX_FILES", 3)
    client.force_login(granted)
    response = client.post("/topology/datanodes/big/discover/")
    assert [d.name for d in response.context["found"].datasets] == [f"part-{i}/data.csv" for i in range(3)]
    assert "Only the first ones are shown." in response.content.decode()
    monkeypatch.setattr(shapes, "DISCOVERY_MAX_ENTRIES", 4)
    assert client.post("/topology/datanodes/big/discover/").context["found"].truncated


def test_the_api_tests_and_discovers_a_granted_node_only(granted, node, folder, warehouse, settings):
    from tests.builders.api import api_client_for

    url, user = warehouse
    node("landing", "files", path=str(folder))
    node("warehouse", "jdbc", url=url, user=user)  # its own account
    node("bare", "jdbc", url=url)  # none: a login is typed for the test, and judged
    api = api_client_for(granted)
    answer = api.post("/api/datanodes/landing/test", {}, format="json").json()
    assert answer["ok"] and "exists and is readable" in answer["message"] and answer["schemas"] == []
    answer = api.post("/api/datanodes/warehouse/test", {}, format="json").json()
    assert answer == {"ok": True, "message": "Connected; 2 schema(s).", "schemas": ["public", "sales"]}
    answer = api.post("/api/datanodes/bare/test", {"user": "nobody_here"}, format="json").json()
    assert answer["ok"] is False and 'role "nobody_here" does not exist' in answer["message"]
    answer = api.post(
        "/api/datanodes/bare/test", {"user": user}, format="json"
    ).json()  # trusted, no password
    assert answer["ok"] is False and FLOW_LOGIN_REFUSED in answer["message"] and answer["schemas"] == []
    found = api.post("/api/datanodes/warehouse/discover", {}, format="json").json()
    orders = next(d for d in found["datasets"] if d["name"] == "sales.orders")
    assert orders["columns"][1] == {
        "name": "updated_at",
        "type": "timestamp without time zone",
        "watermarkSuitable": True,
        "watermarkCandidate": True,
        "candidateReason": "timestamp",
        "primaryKey": False,
    }
    assert orders["primaryKey"] == ["id"] and orders["watermarkCandidates"] == ["id", "updated_at"]
    assert orders["watermarkSource"] == "column" and orders["modifiedAt"] is None
    files = api.post("/api/datanodes/landing/discover", {}, format="json").json()["datasets"]
    events = next(d for d in files if d["name"] == "events.jsonl")
    assert events["watermarkSource"] == "file_modification_time" and events["modifiedAt"].endswith("Z")
    assert events["primaryKey"] == [] and events["watermarkCandidates"] == []
    assert api.post("/api/datanodes/landing/test", {"user": 7}, format="json").status_code == 400

    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    stranger = api_client_for(UserFactory(username="stranger"))
    assert stranger.post("/api/datanodes/landing/test", {}, format="json").status_code == 403
    assert stranger.post("/api/datanodes/warehouse/discover", {}, format="json").status_code == 403


@pytest.fixture
def shop_on_mariadb():
    """A MariaDB database of this test's own on the machine's server (root, no password)."""
    name = f"fp_discover_{os.getpid()}"
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(f"CREATE TABLE `{name}`.orders (id BIGINT PRIMARY KEY, placed DATETIME, note TEXT)")
        cursor.execute(
            f"CREATE TABLE `{name}`.lines (line INT, order_id BIGINT, n INT AUTO_INCREMENT UNIQUE,"
            " price DECIMAL(10,2), PRIMARY KEY (order_id, line))"
        )
    yield f"jdbc:mariadb://127.0.0.1:3306/{name}", name
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    admin.close()


def test_a_mariadb_node_lists_its_schemas_and_tables(client, granted, node, shop_on_mariadb):
    url, name = shop_on_mariadb
    node("shop", "jdbc", url=url, user="root")
    client.force_login(granted)
    verdict = client.post("/topology/datanodes/shop/test/").content.decode()
    assert "Connection works" in verdict and f"<code>{name}</code>" in verdict
    assert "performance_schema" not in verdict

    found = client.post("/topology/datanodes/shop/discover/").context["found"]
    tables = {d.name: d for d in found.datasets}
    assert [(c.name, c.type) for c in tables[f"{name}.orders"].columns] == [
        ("id", "bigint(20)"),
        ("placed", "datetime"),
        ("note", "text"),
    ]
    assert [c.name for c in tables[f"{name}.orders"].watermark_columns] == ["id", "placed"]
    assert tables[f"{name}.orders"].primary_key == ["id"]
    lines = tables[f"{name}.lines"]
    assert lines.primary_key == ["order_id", "line"]  # in key order, not column order
    assert [(c.name, c.candidate) for c in lines.watermark_candidates] == [("n", "identity column")]
    node("bare", "jdbc", url=url)  # no account: the typed login is the one tried
    refused = client.post("/topology/datanodes/bare/test/", {"test_user": "nobody_here"}).content.decode()
    assert "Connection failed" in refused and "nobody_here" in refused
    refused = client.post("/topology/datanodes/bare/test/", {"test_user": "root"}).content.decode()
    assert "Connection failed" in refused and "own password" in refused  # root has none here
