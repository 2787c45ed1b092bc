"""Issue #45's story: a cdc flow keeps a PostgreSQL table merged by key, and the worker is SIGKILLed
right after its commit steps are stored — again and again. Real scheduler, real Celery workers
(two warm ones, armed through failpoint files), real Spark, a private ``wal_level=logical``
PostgreSQL source, and the same story from a private MariaDB writing a row-based binary log.

The killed worker's steps are finished by the redelivered attempt (the publish, its marker, the
watermark, the slot); that attempt must then not publish the same execution's dataset a second
time (it used to pull again, stage 0 rows under the same publish marker and fail with
``CommitConflictError``, after which every run said COMMITTED while the table froze). After every
scenario the table equals the source row for row, the execution is COMMITTED, the watermark is what
was published (PostgreSQL: the slot is released up to it; MariaDB: it is the server's last
transaction)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import CommitStoreDataset, DatasetState, ExecutionStatus
from portal.pipeline.cdc import mysql as cdc_mysql
from portal.pipeline.cdc import pg as cdc_pg
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.integration.crash_harness import (  # noqa: F401 (fixtures)
    QUEUE,
    Workers,
    _relay_through_the_stack_broker,
    eo_dir,
    eo_env,
    eo_scheduler,
    finished,
    format_table,
    how,
)
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"

# One scenario a run: the point the worker that takes the job dies at. The first two are the
# issue's (steps stored, nothing executed: the redo publishes and the attempt must stop there);
# after_step:1 has published the table and its marker but not the watermark; before_source_ack has
# committed all but the slot (PostgreSQL's; a binary log has nothing to acknowledge).


class PgShop:
    """The source ``audit.items`` on a private ``wal_level=logical`` PostgreSQL."""

    table, user = "audit.items", "postgres"
    points = ["after_steps_written", "after_steps_written", "after_step:1", "before_source_ack", ""]

    def __init__(self, found: dict[str, Any]) -> None:
        self.db, self.url = found["db"], found["url"]

    def rows(self) -> list[tuple[Any, ...]]:
        return table(self.db, "audit.items")

    def change(self, run: int) -> None:
        """Inserts, updates, a delete and a key change (a delete and an upsert at one position)."""
        base = 100 * (run + 1)
        self.db.execute(
            "INSERT INTO audit.items SELECT g, 'n' || g, g FROM generate_series(%s::int, %s::int) g",
            (base, base + 9),
        )
        self.db.execute(
            "UPDATE audit.items SET qty = qty + 1, name = name || '+' WHERE id %% 3 = %s::int", (run % 3,)
        )
        self.db.execute("DELETE FROM audit.items WHERE id = (SELECT min(id) FROM audit.items)")
        self.db.execute(
            "UPDATE audit.items SET id = id + 5000 WHERE id = (SELECT max(id) FROM audit.items WHERE id < 5000)"
        )

    def caught_up(self, slot: str, mark: str) -> str:
        """ "yes" when the slot is released up to the stored watermark."""
        released = cdc_pg.state(self.db, slot)
        if released is not None and released.confirmed == cdc_pg.parse_lsn(mark):
            return "yes"
        return f"NO ({mark} vs {released})"


class MariaShop:
    """The source ``<db>.items`` on a private MariaDB writing a row-based binary log."""

    user = "root"
    points = ["after_steps_written", "after_step:1", ""]

    def __init__(self, found: dict[str, Any]) -> None:
        self.conn, self.url, self.name = found["conn"], found["url"], found["name"]
        self.table = f"{self.name}.items"

    def _run(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql.replace("{db}", f"`{self.name}`"), args or None)
            return [tuple(row) for row in cur.fetchall()]

    def rows(self) -> list[tuple[Any, ...]]:
        return self._run("SELECT id, name, qty FROM {db}.items ORDER BY id")

    def change(self, run: int) -> None:
        """The PostgreSQL story's changes, in MariaDB's words."""
        base = 100 * (run + 1)
        for i in range(base, base + 10):
            self._run("INSERT INTO {db}.items VALUES (%s, %s, %s)", i, f"n{i}", i)
        self._run("UPDATE {db}.items SET qty = qty + 1, name = CONCAT(name, '+') WHERE id %% 3 = %s", run % 3)
        (low,) = self._run("SELECT min(id) FROM {db}.items")[0]
        self._run("DELETE FROM {db}.items WHERE id = %s", low)
        (high,) = self._run("SELECT max(id) FROM {db}.items WHERE id < 5000")[0]
        self._run("UPDATE {db}.items SET id = id + 5000 WHERE id = %s", high)

    def caught_up(self, slot: str, mark: str) -> str:
        """ "yes" when the stored watermark is the server's last transaction (nothing changed
        since the run)."""
        (now,) = self._run("SELECT @@gtid_binlog_pos")[0]
        if cdc_mysql.parse_position(mark) == cdc_mysql.parse_position(f"gtid:{now}"):
            return "yes"
        return f"NO ({mark} vs gtid:{now})"


@pytest.fixture(params=["postgresql", "mariadb"])
def shop(request) -> Iterator[Any]:
    if request.param == "postgresql":
        with own_database(
            request.getfixturevalue("logical_pg"),
            "CREATE SCHEMA audit",
            "CREATE TABLE audit.items (id int PRIMARY KEY, name text, qty int)",
            "INSERT INTO audit.items SELECT g, 'i' || g, g FROM generate_series(1, 40) g",
        ) as found:
            yield PgShop(found)
        return
    with own_schema(
        request.getfixturevalue("binlog_mariadb"),
        "CREATE TABLE {db}.items (id int PRIMARY KEY, name varchar(80), qty int)",
        "INSERT INTO {db}.items SELECT seq, CONCAT('i', seq), seq FROM {db}.seq_1_to_40",
    ) as found:
        yield MariaShop(found)


@pytest.fixture
def warehouse() -> Iterator[dict[str, Any]]:
    name = f"flowport_eo_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{name}", autocommit=True) as db:
        yield {"db": db, "url": f"jdbc:postgresql://127.0.0.1:5432/{name}"}
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def table(db: psycopg.Connection, name: str) -> list[tuple[Any, ...]]:
    return db.execute(f"SELECT id, name, qty FROM {name} ORDER BY id").fetchall()  # noqa: S608 - test names


def differences(copy: list[tuple[Any, ...]], source: list[tuple[Any, ...]]) -> str:
    got, want = {r[0]: r for r in copy}, {r[0]: r for r in source}
    missing = len(want.keys() - got.keys())
    extra = len(got.keys() - want.keys())
    stale = sum(1 for k in want.keys() & got.keys() if want[k] != got[k])
    return f"{missing} missing / {extra} extra / {stale} stale"


@pytest.mark.timeout(1800)  # minutes of Spark on 2 cores shared with other suites
def test_sigkill_after_the_commit_steps_are_stored_keeps_a_merged_table_equal_to_its_source(
    shop, warehouse, tmp_path, request, capsys
):
    env, logs = request.getfixturevalue("eo_env"), request.getfixturevalue("eo_dir") / "logs"
    request.getfixturevalue("eo_scheduler")
    topology.create_data_node(
        {"name": "auditdb", "kind": "jdbc", "properties": {"url": shop.url, "user": shop.user}}
    )
    topology.create_data_node(
        {"name": "warehouse", "kind": "jdbc", "properties": {"url": warehouse["url"], "user": "postgres"}}
    )
    topology.create_executor(
        {"name": "eo-ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": QUEUE},
        capabilities=[("auditdb", "warehouse")],
    )
    flow = flow_services.create_flow(
        owner=UserFactory(username="olivia"),
        data={
            "flow_group": "eo",
            "flow_name": "items-merged",
            "source": "auditdb",
            "destinations": ["warehouse"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": shop.table,
                "writer.jdbc.table": "items",
                "writer.write.mode": "merge",
                "extract.primary.key.fields": "id",
                "extract.delta.fields": "_cdc_position",
                "writer.merge.delete.column": "_cdc_deleted",
            },
            "paused": True,
        },
    )
    flow = flow_services.set_paused(flow, False)
    copy, points = warehouse["db"], shop.points
    slot = cdc_pg.slot_name(flow.pk, "eo", "items-merged")
    workers = Workers(env, logs)
    rows: list[dict[str, Any]] = []
    try:
        workers.fill("")
        workers.wait_ready()
        for run, point in enumerate(points):
            began = time.monotonic()
            if run:
                shop.change(run)
            workers.arm(point)
            execution = services.run_now(flow, user=flow.owner)
            died = workers.wait_for_a_death() if point else False
            workers.arm("")
            workers.fill("")
            execution = finished(execution, timeout=900)
            mark = DatasetState.objects.get(flow_id=flow.pk, dataset_urn=shop.table).watermark
            rows.append(
                {
                    "point": point or "(none)",
                    "crashed": "SIGKILL" if died else "no",
                    "recovered": f"{execution.status} ({how(execution)})"
                    if execution.status == ExecutionStatus.COMMITTED
                    else f"{execution.status}: {execution.message[:160]}",
                    "lost": differences(table(copy, "items"), shop.rows()),
                    "watermark": shop.caught_up(slot, mark),
                    "seconds": f"{time.monotonic() - began:.0f}",
                }
            )
            assert not CommitStoreDataset.objects.exists(), format_table(rows)
            assert execution.status == ExecutionStatus.COMMITTED, format_table(rows)
            assert "kipped" not in execution.message, format_table(rows)
    finally:
        workers.stop()
        report = format_table(rows)
        with capsys.disabled():
            print(
                f"\n\nCDC from {shop.table} into a merged PostgreSQL table, SIGKILL at commit points:\n{report}\n"
            )
    for row, point in zip(rows, points, strict=True):
        assert row["crashed"] == ("SIGKILL" if point else "no"), report
        assert row["lost"] == "0 missing / 0 extra / 0 stale", report
        assert row["watermark"] == "yes", report
