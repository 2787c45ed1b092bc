"""Mallory, an ordinary tenant, makes JDBC nodes of her own on this machine's PostgreSQL and
MariaDB, which trust the worker's address: `postgres` without a password, alice's role name
without alice's password, MariaDB's `root` without one, on alice's database and on the servers'
own (`pg_authid`, `pg_stat_activity`, `mysql.global_priv`).

The administrators here allow every database name (`USER_NODE_DATABASES=*`), so that what is
tested is the decision where the connection lands: a user-made node runs with its owner's own
credentials and nothing more (portal.pipeline.usernode). Test connection and discovery show
nothing, a flow reads nothing and writes nothing into alice's database; every refusal says the
same, and the portal's own database is not told apart from any other. Alice's own MariaDB
account, with its password and grants on her database only, still works.

An administrator's node without an account of its own lends the same trust to the login a flow
gives: hers is judged the same way (its own password, no server-wide privilege), in the database
the administrator named.

The servers' roles, databases and accounts are the stories' own (`secdb_` names), dropped after."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pymysql
import pytest
from django.db import connection

from portal.crypto import client
from portal.flows.models import FlowConfig
from portal.keys import services
from portal.pipeline.usernode import FLOW_LOGIN_REFUSED, REFUSED
from portal.topology import services as topology
from portal.topology.models import DataNode, SpecExecutor
from tests.builders.world import World, files_under

ALICE_DB = "secdb_alice_shop"
ALICE = "secdb_alice"  # her role and account on both servers
ALICE_PASSWORD = "alices-own-db-password"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


@pytest.fixture(scope="module")
def alices_postgres() -> Iterator[None]:
    """Alice's database on the machine's PostgreSQL: her role owns it and a private table."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{ALICE_DB}" WITH (FORCE)')
        admin.execute(f'DROP ROLE IF EXISTS "{ALICE}"')
        admin.execute(f"CREATE ROLE \"{ALICE}\" LOGIN PASSWORD '{ALICE_PASSWORD}'")
        admin.execute(f'CREATE DATABASE "{ALICE_DB}" OWNER "{ALICE}"')
    with psycopg.connect(f"host=127.0.0.1 user={ALICE} dbname={ALICE_DB}", autocommit=True) as db:
        db.execute("CREATE SCHEMA private")
        db.execute("CREATE TABLE private.alice_secrets (id integer PRIMARY KEY, secret text)")
        db.execute("INSERT INTO private.alice_secrets VALUES (1, 'alices-secret-row')")
    try:
        yield
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{ALICE_DB}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{ALICE}"')


def _mariadb(database: str | None = None, **login):
    return pymysql.connect(
        host="127.0.0.1", port=3306, database=database, autocommit=True, **({"user": "root"} | login)
    )


@pytest.fixture(scope="module")
def alices_mariadb() -> Iterator[None]:
    """Alice's database on the machine's MariaDB, her account with a password and grants on it
    only; `secdb_wide`, an account with a password and SELECT on every database."""
    with _mariadb() as root, root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {ALICE_DB}")
        cur.execute(f"DROP USER IF EXISTS '{ALICE}'@'%', 'secdb_wide'@'%'")
        cur.execute(f"CREATE DATABASE {ALICE_DB}")
        cur.execute(f"CREATE USER '{ALICE}'@'%' IDENTIFIED BY '{ALICE_PASSWORD}'")
        cur.execute(f"GRANT ALL ON {ALICE_DB}.* TO '{ALICE}'@'%'")
        cur.execute("CREATE USER 'secdb_wide'@'%' IDENTIFIED BY 'wide-password'")
        cur.execute("GRANT SELECT ON *.* TO 'secdb_wide'@'%'")
        cur.execute(f"CREATE TABLE {ALICE_DB}.alice_secrets (id int PRIMARY KEY, secret text)")
        cur.execute(f"INSERT INTO {ALICE_DB}.alice_secrets VALUES (1, 'alices-secret-row')")  # noqa: S608
    try:
        yield
    finally:
        with _mariadb() as root, root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {ALICE_DB}")
            cur.execute(f"DROP USER IF EXISTS '{ALICE}'@'%', 'secdb_wide'@'%'")


@pytest.fixture
def servers(world: World, alices_postgres, alices_mariadb, settings, tmp_path) -> None:
    """Every grant a tenant has: nodes of her own as sources and destinations of the executor's
    routes; an administrator who allows every database name."""
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    settings.USER_NODE_DATABASES = ["*"]
    executor = SpecExecutor.objects.get(name="x1")
    topology.update_executor(executor, {"user_sources": "files,jdbc", "user_destinations": "files,jdbc"})


def her_node(world: World, name: str, url: str, user: str, password: str = "") -> None:
    body = {"name": name, "kind": "jdbc", "properties": {"url": url, "user": user}}
    if password:
        body["secrets"] = {"password": password}
    made = world.api().post("/api/datanodes", body, format="json")
    assert made.status_code == 201, made.content


PIVOTS = {
    "postgres on alice's database": (f"jdbc:postgresql://127.0.0.1:5432/{ALICE_DB}", "postgres"),
    "alice's role without her password": (f"jdbc:postgresql://127.0.0.1:5432/{ALICE_DB}", ALICE),
    "postgres on the server's own database": ("jdbc:postgresql://127.0.0.1:5432/postgres", "postgres"),
    "root on alice's MariaDB database": (f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}", "root"),
    "root on MariaDB's mysql database": ("jdbc:mariadb://127.0.0.1:3306/mysql", "root"),
    "an account reading every MariaDB database": (f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}", "secdb_wide"),
}


@pytest.mark.parametrize("pivot", sorted(PIVOTS))
def test_test_connection_and_discovery_of_a_borrowed_login_show_nothing(world: World, servers, pivot):
    url, user = PIVOTS[pivot]
    her_node(world, "borrowed", url, user, "wide-password" if user == "secdb_wide" else "")
    tested = world.api().post("/api/datanodes/borrowed/test", {}, format="json").json()
    found = world.api().post("/api/datanodes/borrowed/discover", {}, format="json").json()
    assert tested["ok"] is False and REFUSED in tested["message"], tested
    assert found["ok"] is False and REFUSED in found["message"], found
    assert not tested.get("schemas") and not found.get("datasets")
    assert "alice_secrets" not in str(found) and "pg_authid" not in str(found)


@pytest.mark.parametrize(
    ("pivot", "table"),
    [
        ("postgres on alice's database", "private.alice_secrets"),
        ("root on alice's MariaDB database", "alice_secrets"),
    ],
)
def test_her_flow_over_a_borrowed_login_reads_nothing(transactional_db, world: World, servers, pivot, table):
    url, user = PIVOTS[pivot]
    her_node(world, "borrowed", url, user)
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(
        source="borrowed",
        properties={"source.jdbc.tables": table, "extract.is.full": "true", "writer.output.format": "csv"},
    )
    world.mallory_flow.refresh_from_db()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and REFUSED in job.message, job.message
    assert files_under(world.lake / "mal") == []


def test_her_flow_writes_nothing_into_alices_database(transactional_db, world: World, servers):
    url, user = PIVOTS["postgres on alice's database"]
    her_node(world, "alices-db", url, user)
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(
        destinations=["alices-db"],
        properties={"source.files.format": "csv", "writer.jdbc.table": "public.mallory_was_here"},
    )
    world.mallory_flow.refresh_from_db()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and REFUSED in job.message, job.message
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={ALICE_DB}") as db:
        assert db.execute("SELECT to_regclass('public.mallory_was_here')").fetchone() == (None,)


@pytest.mark.parametrize("table", ["pg_catalog.pg_authid", "pg_stat_activity", "information_schema.tables"])
def test_her_flow_naming_a_system_catalog_is_refused_at_save(world: World, servers, table):
    her_node(world, "hers", f"jdbc:postgresql://127.0.0.1:5432/{ALICE_DB}", ALICE, ALICE_PASSWORD)
    answer = world.post_flow(
        {"source.jdbc.tables": table, "extract.is.full": "true", "writer.output.format": "csv"}, source="hers"
    )
    assert answer.status_code == 400, answer.content
    assert f"source.jdbc.tables: '{table}' is a system catalog" in answer.content.decode()


@pytest.mark.postgres  # guesses the name of the portal's PostgreSQL database on its server
def test_a_refusal_does_not_tell_the_portals_database_from_any_other(world: World, settings, tmp_path):
    """The administrators' default policy: her own databases only. Guessing the portal's database
    name gets the answer any other name gets."""
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    answers = []
    for name in (connection.settings_dict["NAME"], "secdb_no_such_database", ALICE_DB):
        body = {
            "name": "guess",
            "kind": "jdbc",
            "properties": {"url": f"jdbc:postgresql://127.0.0.1:5432/{name}"},
        }
        answer = world.api().post("/api/datanodes", body, format="json")
        assert answer.status_code == 400, answer.content
        answers.append(answer.json())
    assert answers[0] == answers[1] == answers[2]
    assert "portal" not in str(answers[0]) and not DataNode.objects.filter(name="guess").exists()


def test_alices_own_account_with_her_password_still_works(world: World, servers, settings):
    settings.USER_NODE_DATABASES = ["{user}_*"]
    alice = world.victor
    alice.username = ALICE
    alice.save(update_fields=["username"])
    made = world.api(alice).post(
        "/api/datanodes",
        {
            "name": "alices-shop",
            "kind": "jdbc",
            "properties": {"url": f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}", "user": ALICE},
            "secrets": {"password": ALICE_PASSWORD},
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    tested = world.api(alice).post("/api/datanodes/alices-shop/test", {}, format="json").json()
    assert tested["ok"] is True, tested
    found = world.api(alice).post("/api/datanodes/alices-shop/discover", {}, format="json").json()
    assert [d["name"] for d in found["datasets"]] == [f"{ALICE_DB}.alice_secrets"], found


# --- an administrator's node without an account: the login is the flow's -------------------------


def her_login(world: World, user: str, password: str) -> dict[str, str]:
    """The flow properties of a login she gives, her password encrypted under a key of hers."""
    if not password:
        return {"source.conn.username": user}
    key = services.wrap_customer_key(
        user=world.mallory, key=client.encode_key(client.generate_key()), label="db"
    ).customer_key
    return {
        "source.conn.username": user,
        "source.conn.password": services.encrypt_value(key.wrapped_key, password),
        "encrypt.wrapped.key": key.wrapped_key,
    }


def admins_node(url: str) -> None:
    """Staff's node `landing` (she holds read and write on it) now points at ``url``, no account."""
    DataNode.objects.filter(name="landing").update(kind="jdbc", properties={"url": url})


FLOW_LOGINS = {
    "postgres on alice's database": (f"jdbc:postgresql://127.0.0.1:5432/{ALICE_DB}", "postgres", ""),
    "root on alice's MariaDB database": (f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}", "root", ""),
    "an account reading every MariaDB database": (
        f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}",
        "secdb_wide",
        "wide-password",
    ),
}


@pytest.mark.parametrize("login", sorted(FLOW_LOGINS))
def test_her_flow_cannot_borrow_the_workers_trust_through_an_admins_node(
    transactional_db, world: World, servers, login
):
    url, user, password = FLOW_LOGINS[login]
    admins_node(url)
    table = "private.alice_secrets" if "postgresql" in url else "alice_secrets"
    properties = {"source.jdbc.tables": table, "extract.is.full": "true", "writer.output.format": "csv"}
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(
        properties=properties | her_login(world, user, password)
    )
    world.mallory_flow.refresh_from_db()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and FLOW_LOGIN_REFUSED in job.message, job.message
    assert files_under(world.lake / "mal") == []


def test_her_flow_cannot_write_as_postgres_through_an_admins_node(transactional_db, world: World, servers):
    DataNode.objects.filter(name="lake").update(
        kind="jdbc", properties={"url": f"jdbc:postgresql://127.0.0.1:5432/{ALICE_DB}"}
    )
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(
        properties={
            "source.files.format": "csv",
            "writer.jdbc.table": "public.mallory_was_here",
            "writer.jdbc.username": "postgres",
        }
    )
    world.mallory_flow.refresh_from_db()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and FLOW_LOGIN_REFUSED in job.message, job.message
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={ALICE_DB}") as db:
        assert db.execute("SELECT to_regclass('public.mallory_was_here')").fetchone() == (None,)


@pytest.mark.parametrize("login", sorted(FLOW_LOGINS))
def test_test_connection_with_a_typed_login_on_an_admins_node_shows_nothing(world: World, servers, login):
    url, user, password = FLOW_LOGINS[login]
    admins_node(url)
    typed = {"user": user, "password": password}
    tested = world.api().post("/api/datanodes/landing/test", typed, format="json").json()
    found = world.api().post("/api/datanodes/landing/discover", typed, format="json").json()
    assert tested["ok"] is False and FLOW_LOGIN_REFUSED in tested["message"], tested
    assert found["ok"] is False and FLOW_LOGIN_REFUSED in found["message"], found
    assert "alice_secrets" not in str(found) and not tested.get("schemas")


def test_alices_own_login_on_an_admins_node_still_reads(transactional_db, world: World, servers):
    """Her own MariaDB account and password, given by her flow: the administrator's node takes it."""
    admins_node(f"jdbc:mariadb://127.0.0.1:3306/{ALICE_DB}")
    typed = {"user": ALICE, "password": ALICE_PASSWORD}
    found = world.api().post("/api/datanodes/landing/discover", typed, format="json").json()
    assert [d["name"] for d in found["datasets"]] == [f"{ALICE_DB}.alice_secrets"], found
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(
        properties={
            "source.jdbc.tables": "alice_secrets",
            "extract.is.full": "true",
            "writer.output.format": "csv",
            **her_login(world, ALICE, ALICE_PASSWORD),
        }
    )
    world.mallory_flow.refresh_from_db()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "COMMITTED", job.message
    written = "".join(p.read_text() for p in files_under(world.lake / "mal") if p.suffix == ".csv")
    assert "alices-secret-row" in written
