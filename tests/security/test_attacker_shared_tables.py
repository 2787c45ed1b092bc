"""Victor and mallory both hold a write grant on one PostgreSQL destination (the administrators'
node `shared-db`, victor its owner). A write grant lets mallory's flows write into the node, not
into victor's tables in it: the table victor's flow created, and the table that was there before
any flow (the node owner's). She names them in her flow (refused at save, 400 naming the key) or
gets there past the save (a flow saved before the record, a `{table}` template): the worker refuses
her run before anything is published, in every write mode, and victor's rows stay as they were.
Her own new table is hers, and staff can hand a table to her."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.topology import services as topology
from portal.topology import tables
from portal.topology.models import DataNode, DestinationTable
from tests.builders.world import World
from tests.unit.topology.helpers import executor as make_executor

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
MODES = ("append", "overwrite", "merge", "history")


@pytest.fixture
def shared_db(transactional_db, world: World, settings) -> Iterator[str]:
    """A database of the test's own behind `shared-db`; victor's hand-made table in it."""
    name = f"secice_shared_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE TABLE public.victor_ledger (id int PRIMARY KEY, amount int)")
        db.execute("INSERT INTO public.victor_ledger VALUES (1, 999)")
    acl = [{"role": "owner", "user": "victor"}, {"role": "write", "user": "mallory"}]
    topology.create_data_node(
        {
            "name": "shared-db",
            "kind": "jdbc",
            "properties": {"url": f"jdbc:postgresql://127.0.0.1:5432/{name}", "user": "postgres"},
            "acl": acl,
        }
    )
    make_executor("x5", "landing>shared-db", spark_master=settings.SPARK_MASTER)
    yield url
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def rows(url: str, table: str) -> list[tuple]:
    with psycopg.connect(url) as db:
        query = sql.SQL("SELECT id, amount FROM {} ORDER BY id").format(sql.Identifier(*table.split(".")))
        return db.execute(query).fetchall()


def flow_of(world: World, user, group: str, name: str, table: str, mode: str = "append") -> FlowConfig:
    return FlowConfig.objects.create(
        flow_group=group,
        flow_name=name,
        owner=user,
        source="landing",
        destinations=["shared-db"],
        properties={
            "source.files.format": "csv",
            "writer.jdbc.table": table,
            "writer.write.mode": mode,
            "extract.primary.key.fields": "id",
        },
    )


def run(world: World, flow: FlowConfig):
    new = len(list((world.landing / "orders").iterdir())) + 1
    (world.landing / "orders" / f"part-{new}.csv").write_text(f"id,amount\n{new},{new}0\n")
    execution, spec = world.bound_spec(flow)
    return world.run_on_worker(spec, execution)


@pytest.fixture
def victors_table(world: World, shared_db) -> str:
    """Victor's flow creates public.victor_orders: it is his."""
    job = run(world, flow_of(world, world.victor, "team-v", "to-db", "public.victor_orders"))
    assert job.status == "COMMITTED", job.message
    return "public.victor_orders"


def test_she_cannot_write_into_his_table_at_save_nor_in_any_mode_at_run(
    world: World, shared_db, victors_table
):
    for spelling in ("public.victor_orders", "victor_orders", '"public"."victor_orders"'):
        answer = world.post_flow({"writer.jdbc.table": spelling}, destinations=["shared-db"])
        assert answer.status_code == 400, answer.content
        assert "writer.jdbc.table" in answer.content.decode()
        assert "belongs to user 'victor'" in answer.content.decode()
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="other").exists()
    before = rows(shared_db, victors_table)
    for mode in MODES:  # past the save: a {table} template the save cannot resolve
        job = run(world, flow_of(world, world.mallory, "mal", f"grab-{mode}", "public.victor_{table}", mode))
        assert job.status == "FAILED", (mode, job.message)
        assert "belongs to user 'victor'" in job.message, (mode, job.message)
        assert rows(shared_db, victors_table) == before, mode


def test_a_table_there_before_any_flow_is_the_node_owners(world: World, shared_db):
    job = run(world, flow_of(world, world.mallory, "mal", "grab-db", "public.victor_ledger", "merge"))
    assert job.status == "FAILED" and "belongs to the node's owners" in job.message, job.message
    assert rows(shared_db, "public.victor_ledger") == [(1, 999)]
    owner = run(world, flow_of(world, world.victor, "team-v", "ledger", "public.victor_ledger", "merge"))
    assert owner.status == "COMMITTED", owner.message


def test_her_own_new_table_is_hers_and_staff_can_hand_his_to_her(world: World, shared_db, victors_table):
    mine = run(world, flow_of(world, world.mallory, "mal", "mine", "public.mallory_orders"))
    assert mine.status == "COMMITTED", mine.message
    record = DestinationTable.objects.get(node__name="shared-db", name="public.mallory_orders")
    assert (record.owner, record.flow) == (world.mallory, "mal/mine")
    refused = compile_flow(flow_of(world, world.victor, "team-v", "into-hers", "mallory_orders")).to_dict()
    assert refused["status"] == "FAILED" and "belongs to user 'mallory'" in str(refused), refused
    tables.assign(DataNode.objects.get(name="shared-db"), victors_table, world.mallory)
    handed = run(world, flow_of(world, world.mallory, "mal", "grab-db", victors_table))
    assert handed.status == "COMMITTED", handed.message


def test_she_cannot_save_a_flow_naming_his_iceberg_table(world: World, settings):
    """The same in a shared Iceberg node: his run recorded team-v.orders as his."""
    acl = [{"role": "owner", "user": "victor"}, {"role": "write", "user": "mallory"}]
    props = {"catalog.uri": f"sqlite:///{world.tmp / 'catalog.db'}", "warehouse": str(world.tmp / "wh")}
    node = topology.create_data_node(
        {"name": "shared-ice", "kind": "iceberg", "properties": props, "acl": acl}
    )
    make_executor("x6", "landing>shared-ice", spark_master=settings.SPARK_MASTER)
    assert tables.claim(world.victor, node, "team-v.orders", exists=False, flow="team-v/orders") is None
    names = {"writer.iceberg.namespace": "team-v", "writer.iceberg.table": "orders"}
    answer = world.post_flow(names, destinations=["shared-ice"])
    assert answer.status_code == 400, answer.content
    assert "writer.iceberg.table" in answer.content.decode()
    assert "belongs to user 'victor'" in answer.content.decode()
    mine = world.post_flow({**names, "writer.iceberg.namespace": "mal"}, destinations=["shared-ice"])
    assert mine.status_code == 201, mine.content
