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

from portal.crypto import client
from portal.flows.models import FlowConfig
from portal.keys import services
from portal.orchestration.state.commitstore import CommitStepStore, store_name_for
from portal.topology import services as topology
from portal.topology.models import DataNode
from tests.builders.world import World, files_under
from tests.factories import UserFactory
from tests.pg_logical import private_server

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


WORKERS_SUPERUSER_READS = {
    "a table no tenant was granted": ("private.payroll", "victims-secret-row"),
    "every role's password hash": ("pg_catalog.pg_authid", "postgres"),
}


@pytest.mark.parametrize("target", sorted(WORKERS_SUPERUSER_READS))
def test_a_password_only_node_does_not_lend_the_workers_own_superuser(
    transactional_db, world: World, victim, target
):
    """Staff keep only a password on the node (the user is to be each flow's). with_node_credentials
    then drops her flow's user name, so the drivers log in as the worker's operating-system user:
    `root`, a superuser this server trusts. Nothing judges it (policy.takes_flow_login says the node
    has an account), so her flow reads a table no tenant was granted — or `pg_authid`."""
    table, secret = WORKERS_SUPERUSER_READS[target]
    staff_node("landing", VICTIM_URL, {"password": "a-shared-password"})
    her_flow(
        world,
        {
            "source.jdbc.tables": table,
            "extract.is.full": "true",
            "writer.output.format": "csv",
            "source.conn.username": "mallory_would_give_her_own",
        },
    )
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", job.message
    assert secret not in read_everything(world)


def test_test_connection_on_a_password_only_node_shows_nothing_of_the_workers_superuser(world: World, victim):
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


def test_an_account_less_destination_takes_no_branch_spelled_superuser(
    transactional_db, world: World, victim
):
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


# --- what must still work: her own role and password, on a server that asks for it -------------


@pytest.fixture(scope="module")
def asking_server() -> Iterator[str]:
    """host:port of a private server asking every login for its password, with her role and database."""
    with private_server(password=True) as url:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE mal_role LOGIN PASSWORD '{HER_PASSWORD}'")
            admin.execute("CREATE DATABASE mal_shop OWNER mal_role")
        where = url.rsplit("@", 1)[1].split("/")[0]
        with psycopg.connect(f"postgres://mal_role:{HER_PASSWORD}@{where}/mal_shop", autocommit=True) as db:
            db.execute("CREATE TABLE orders (id int PRIMARY KEY, note text)")
            db.execute("INSERT INTO orders SELECT g, 'n' || g FROM generate_series(1, 5) g")
        yield where


HER_PASSWORD = "mallorys-own-db-password"


def test_her_own_login_writes_and_publishes_through_an_account_less_destination(
    transactional_db, world: World, asking_server
):
    key = services.wrap_customer_key(
        user=world.mallory, key=client.encode_key(client.generate_key()), label="db"
    ).customer_key
    staff_node("lake", f"jdbc:postgresql://{asking_server}/mal_shop")
    her_flow(
        world,
        {
            "source.files.format": "csv",
            "writer.jdbc.table": "public.landed",
            "writer.jdbc.username": "mal_role",
            "writer.jdbc.password": services.encrypt_value(key.wrapped_key, HER_PASSWORD),
            "encrypt.wrapped.key": key.wrapped_key,
        },
    )
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "COMMITTED", job.message
    with psycopg.connect(f"postgres://mal_role:{HER_PASSWORD}@{asking_server}/mal_shop") as db:
        assert db.execute("SELECT count(*) FROM public.landed").fetchone() == (1,)


# --- a commit step written before the judgement (no `user_node`) ---------------------------------


def test_a_publish_step_kept_from_before_the_change_is_judged_at_recovery(
    transactional_db, world: World, victim
):
    """Before 2da3e06 her flow's writer, as `postgres` on staff's account-less node, staged a table
    and the worker stopped before the publish: its jdbc_publish step (no `user_node`, which only
    steps written since carry) waits in the store. The upgraded worker's recovery finishes it as
    `postgres`, judged by nothing: her rows land in a table she could never have created."""
    staff_node("lake", VICTIM_URL)
    her_flow(world, {"source.files.format": "csv", "writer.jdbc.table": "public.mallory_was_here"})
    execution, spec = world.bound_spec()
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={VICTIM_DB}", autocommit=True) as db:
        db.execute("CREATE TABLE public.fp_stg_left_by_old_worker (id int, amount int)")
        db.execute("INSERT INTO public.fp_stg_left_by_old_worker VALUES (7, 70)")
    step = {
        "type": "jdbc_publish",
        "dataset_urn": "orders",
        "branch": 0,
        "url": VICTIM_URL,
        "user": "postgres",
        "password_property": None,
        "target_table": "public.mallory_was_here",
        "marker_table": "flowport_publish_marker",
        "staging_tables": ["public.fp_stg_left_by_old_worker"],
        "rows": 1,
        "execution_id": 0,
        "job_name": spec["job_name"],
        "write_mode": "append",
    }
    CommitStepStore().put_all(store_name_for(spec), "orders", [step])
    job = world.run_on_worker(spec, execution)
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={VICTIM_DB}") as db:
        made = db.execute("SELECT to_regclass('public.mallory_was_here')").fetchone()
        rows = db.execute("SELECT * FROM public.mallory_was_here").fetchall() if made and made[0] else []
    assert made == (None,), (rows, job.status, job.message)
