"""Mallory, an ordinary tenant holding read and write on staff's nodes, against the judgement of a
flow's own login on an administrator's JDBC node (issue #46, usernode.FLOW_LOGIN): the logins her
flow can make the worker use, on this machine's PostgreSQL, which trusts the worker's address and
has superusers `postgres` and — the worker's own operating-system name — `root`.

Each story runs her flow through the worker's execute_job, as a Celery worker runs it. The victim
is `secdb_atk_victim`, a database whose private table no tenant was granted; dropped after."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from portal.flows.models import FlowConfig
from portal.topology import services as topology
from portal.topology.models import DataNode
from tests.factories import UserFactory
from tests.security.conftest import World, files_under

VICTIM_DB = "secdb_atk_victim"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
VICTIM_URL = f"jdbc:postgresql://127.0.0.1:5432/{VICTIM_DB}"


@pytest.fixture(scope="module")
def victim() -> Iterator[None]:
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{VICTIM_DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{VICTIM_DB}"')
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={VICTIM_DB}", autocommit=True) as db:
        db.execute("CREATE SCHEMA private")
        db.execute("CREATE TABLE private.payroll (id integer PRIMARY KEY, secret text)")
        db.execute("INSERT INTO private.payroll VALUES (1, 'victims-secret-row')")
        db.execute("REVOKE ALL ON SCHEMA private FROM PUBLIC")
    try:
        yield
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{VICTIM_DB}" WITH (FORCE)')


def staff_node(name: str, url: str, secrets: dict[str, str] | None = None) -> None:
    """Staff point their node ``name`` (mallory holds read and write on it) at ``url``."""
    staff = UserFactory(username="staffer", is_staff=True, is_superuser=True)
    node = DataNode.objects.get(name=name)
    data = {"kind": "jdbc", "properties": {"url": url}}
    topology.update_data_node(node, {**data, "secrets": secrets or {}}, user=staff)


def her_flow(world: World, properties: dict[str, str]) -> None:
    FlowConfig.objects.filter(pk=world.mallory_flow.pk).update(properties=properties)
    world.mallory_flow.refresh_from_db()


def read_everything(world: World) -> str:
    return "".join(p.read_text() for p in files_under(world.lake / "mal") if p.suffix == ".csv")


# --- an administrator's node whose account is only a password ------------------------------------


def test_a_password_only_node_does_not_lend_the_workers_own_superuser(
    transactional_db, world: World, victim
):
    """Staff keep only a password on the node (the user is to be each flow's). with_node_credentials
    then drops her flow's user name, so the drivers log in as the worker's operating-system user:
    `root`, a superuser this server trusts. Nothing judges it (policy.takes_flow_login says the node
    has an account), so her flow reads a table no tenant was granted — or `pg_authid`."""
    staff_node("landing", VICTIM_URL, {"password": "a-shared-password"})
    her_flow(
        world,
        {
            "source.jdbc.tables": "private.payroll",
            "extract.is.full": "true",
            "writer.output.format": "csv",
            "source.conn.username": "mallory_would_give_her_own",
        },
    )
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", job.message
    assert "victims-secret-row" not in read_everything(world)


def test_test_connection_on_a_password_only_node_shows_nothing_of_the_workers_superuser(
    world: World, victim
):
    staff_node("landing", VICTIM_URL, {"password": "a-shared-password"})
    tested = world.api().post("/api/datanodes/landing/test", {}, format="json").json()
    found = world.api().post("/api/datanodes/landing/discover", {}, format="json").json()
    assert tested["ok"] is False, tested
    assert "payroll" not in str(found), found


# --- an account-less node: the flow's login, every spelling -------------------------------------


FLOW_KEYS = {
    "no user at all (the worker's own name)": {},
    "a password and no user": {"source.conn.password": "anything"},
}


@pytest.mark.parametrize("login", sorted(FLOW_KEYS))
def test_an_account_less_node_with_no_flow_user_is_not_the_workers_superuser(
    transactional_db, world: World, victim, login
):
    staff_node("landing", VICTIM_URL)
    her_flow(
        world,
        {
            "source.jdbc.tables": "private.payroll",
            "extract.is.full": "true",
            "writer.output.format": "csv",
            "source.jdbc.arrow": "true",
            **FLOW_KEYS[login],
        },
    )
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", job.message
    assert "victims-secret-row" not in read_everything(world)


def test_an_account_less_destination_takes_no_branch_spelled_superuser(transactional_db, world: World, victim):
    staff_node("lake", VICTIM_URL)
    her_flow(
        world,
        {
            "source.files.format": "csv",
            "writer.jdbc.table": "public.mallory_was_here",
            "writer.jdbc.username.0": "postgres",
            "destination.lake.writer.jdbc.username": "root",
        },
    )
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", job.message
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={VICTIM_DB}") as db:
        assert db.execute("SELECT to_regclass('public.mallory_was_here')").fetchone() == (None,)


def test_typed_test_connection_without_a_user_on_an_account_less_node_shows_nothing(world: World, victim):
    staff_node("landing", VICTIM_URL)
    tested = world.api().post("/api/datanodes/landing/test", {"user": ""}, format="json").json()
    found = world.api().post("/api/datanodes/landing/discover", {}, format="json").json()
    assert tested["ok"] is False, tested
    assert "payroll" not in str(found), found
