"""Mona's own database, on a server that asks every login for its password (the only kind a
user-made node may use): she registers it twice — as the source of a flow and as its destination —
with her role's password, typed once and stored encrypted, and her flow reads and publishes there
for real, in a worker as a Celery worker runs it. (An independent check of issue #46 found such a
node read but never published: the commit steps' connection had no password.)"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pyarrow.parquet as pq
import pytest

from portal.flows import services as flow_services
from portal.keys import services as keys
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import FlowExecution
from portal.orchestration.worker import executor
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.pg_logical import private_server

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "monas-own-password"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """host:port of a private server asking for passwords, with Mona's role and database."""
    with private_server(password=True) as url:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE mona LOGIN PASSWORD '{PASSWORD}'")
            admin.execute("CREATE DATABASE mona_shop OWNER mona")
        where = url.rsplit("@", 1)[1].split("/")[0]
        with psycopg.connect(f"postgres://mona:{PASSWORD}@{where}/mona_shop", autocommit=True) as db:
            db.execute("CREATE TABLE orders (id int PRIMARY KEY, note text, updated_at timestamptz)")
            db.execute("INSERT INTO orders SELECT g, 'n' || g, now() FROM generate_series(1, 25) g")
        yield where


def test_her_own_database_is_read_and_published_with_her_password(server, settings, tmp_path):
    settings.USER_NODE_DATABASE_HOSTS = [server]
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    mona = UserFactory(username="mona")
    url = f"jdbc:postgresql://{server}/mona_shop"
    for name in ("mona-shop", "mona-copy"):
        node = {"url": url, "user": "mona"}
        made = {"name": name, "kind": "jdbc", "properties": node, "secrets": {"password": PASSWORD}}
        topology.create_data_node(made, user=mona)
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": settings.SPARK_MASTER, "queue": "it.own",
         "user_sources": "jdbc", "user_destinations": "jdbc"},
        capabilities=[],
    )  # fmt: skip
    flow = flow_services.create_flow(
        owner=mona,
        data={
            "flow_group": "mona",
            "flow_name": "orders-copy",
            "source": "mona-shop",
            "destinations": ["mona-copy"],
            "paused": True,
            "properties": {
                "source.jdbc.tables": "public.orders",
                "extract.is.full": "true",
                "writer.jdbc.table": "orders_copy",
            },
        },
    )
    flow = flow_services.set_paused(flow, False)

    execution = services.run_now(flow, user=mona)
    process_actions()
    job = execution.jobs.get()
    outcome = executor.execute_job(job.pk, job.attempt, job.spec)
    process_actions()

    execution = FlowExecution.objects.get(pk=execution.pk)
    job.refresh_from_db()
    assert (outcome, execution.status) == ("committed", "COMMITTED"), job.message
    with psycopg.connect(f"postgres://mona:{PASSWORD}@{server}/mona_shop") as db:
        copied = db.execute("SELECT count(*), min(id), max(id) FROM orders_copy").fetchone()
        staged = db.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'fp_stg_%'").fetchone()
    assert copied == (25, 1, 25)
    assert staged == (0,)  # nothing left behind in her database


def test_an_admins_node_without_an_account_reads_with_the_login_her_flow_gives(server, settings, tmp_path):
    """Staff's node on her database keeps no account: her flow's own login (its password encrypted
    under her key) is judged where it lands and read through the Arrow reader too."""
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    mona = UserFactory(username="mona")
    url = f"jdbc:postgresql://{server}/mona_shop"
    topology.create_data_node({"name": "shared-shop", "kind": "jdbc", "properties": {"url": url}})
    topology.create_data_node(
        {"name": "lake", "kind": "files", "properties": {"path": str(tmp_path / "lake")}}
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": settings.SPARK_MASTER, "queue": "it.own"},
        capabilities=[("shared-shop", "lake")],
    )  # fmt: skip
    wrapped = keys.wrap_customer_key(user=mona, generate=True).customer_key.wrapped_key
    flow = flow_services.create_flow(
        owner=mona,
        data={
            "flow_group": "mona",
            "flow_name": "orders-lake",
            "source": "shared-shop",
            "destinations": ["lake"],
            "paused": True,
            "properties": {
                "source.jdbc.tables": "public.orders",
                "extract.is.full": "true",
                "source.jdbc.arrow": "true",
                "source.conn.username": "mona",
                "source.conn.password": keys.encrypt_value(wrapped, PASSWORD),
                "encrypt.wrapped.key": wrapped,
            },
        },
    )
    flow = flow_services.set_paused(flow, False)

    execution = services.run_now(flow, user=mona)
    process_actions()
    job = execution.jobs.get()
    outcome = executor.execute_job(job.pk, job.attempt, job.spec)
    process_actions()

    job.refresh_from_db()
    assert (outcome, FlowExecution.objects.get(pk=execution.pk).status) == ("committed", "COMMITTED"), (
        job.message
    )
    written = pq.read_table(tmp_path / "lake" / "mona" / "orders-lake").to_pydict()
    assert sorted(written["id"]) == list(range(1, 26))
