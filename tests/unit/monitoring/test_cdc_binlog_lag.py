"""An operator watches a MariaDB change-data-capture flow, which keeps no slot, on a private server
writing a row-based binlog: the flow page's card shows how far the destination is behind the
server's binlog (bytes, transactions, seconds), the monitor raises ``cdc.slot_lagging`` once and
``cdc.slot_ok`` when it clears, and a position in binlog files the server purged is
``cdc.slot_lost``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from portal.events.models import Event
from portal.flows import services as flow_services
from portal.monitoring import slots
from portal.orchestration.models import DatasetState
from portal.pipeline.cdc import mysql as cdc_mysql
from portal.pipeline.cdc.snapshot import Progress, join
from portal.topology import services as topology
from tests.builders.executions import make_execution
from tests.factories import UserFactory
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def capture(binlog_mariadb: dict[str, Any], settings) -> Iterator[dict[str, Any]]:  # noqa: F811
    settings.CDC_SLOT_CACHE_SECONDS = 60
    cache.clear()
    with own_schema(
        binlog_mariadb, "CREATE TABLE {db}.customers (id int PRIMARY KEY, name varchar(300))"
    ) as shop:
        yield _capture(shop)


def _capture(shop: dict[str, Any]) -> dict[str, Any]:
    name, url = shop["name"], shop["url"]
    owner = UserFactory(username="olivia")
    topology.create_data_node({"name": "shopdb", "kind": "jdbc", "properties": {"url": url, "user": "root"}})
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "/tmp/lake"}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc"},
        capabilities=[("shopdb", "lake")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "binlog-log",
            "source": "shopdb",
            "destinations": ["lake"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": f"{name}.customers",
                "source.cdc.alert.lag.bytes": "1000",
            },
            "paused": True,
        },
    )
    return {
        "flow": flow,
        "owner": owner,
        "conn": shop["conn"],
        "name": name,
        "job": flow.compiled_dag.dag["jobs"][0]["jobName"],
    }


def run(capture: dict[str, Any], statement: str) -> None:
    with capture["conn"].cursor() as cur:
        cur.execute(statement.replace("shop.", f"`{capture['name']}`."))


def commit(capture: dict[str, Any], position: str, *, minutes_ago: float) -> None:
    """A run that started ``minutes_ago`` committed the table at ``position``."""
    flow = capture["flow"]
    execution = make_execution(flow, started=timezone.now() - timedelta(minutes=minutes_ago))
    DatasetState.objects.update_or_create(
        flow_id=flow.pk,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        job_name=capture["job"],
        dataset_urn=f"{capture['name']}.customers",
        defaults={"watermark": position, "execution_id": execution.execution_id},
    )


def purge(capture: dict[str, Any], newest: str) -> None:
    """Purge every binlog file before ``newest`` (the server keeps a file until its transactions'
    checkpoint is done: a moment after the rotation)."""
    deadline = time.monotonic() + 30
    while True:
        run(capture, f"PURGE BINARY LOGS TO '{newest}'")
        with capture["conn"].cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            if cur.fetchone()[0] == newest or time.monotonic() > deadline:
                return
        time.sleep(0.2)


def here(capture: dict[str, Any]) -> str:
    return cdc_mysql.current(capture["conn"]).text()


def test_the_flow_page_shows_the_binlog_lag_and_the_monitor_alerts_once(capture, client):
    flow = capture["flow"]
    client.force_login(capture["owner"])
    fragment = reverse("monitoring:flow_slot", args=["shop", "binlog-log"])
    first = client.get(fragment).content.decode()
    assert 'data-kind="binlog"' in first and 'data-status="new"' in first

    commit(capture, here(capture), minutes_ago=30)
    report = slots.read(flow, fresh=True)
    assert report is not None and report.status == "ok" and report.kind == "binlog"
    assert (report.lag_bytes, report.lag_transactions, report.lag_seconds) == (0, 0, 0.0)

    for i in range(40):
        run(capture, f"INSERT INTO shop.customers VALUES ({i}, REPEAT('x', 200))")  # noqa: S608 - test values
    report = slots.read(flow, fresh=True)
    assert report.status == "lagging" and report.lag_transactions == 40
    assert report.lag_bytes > 40 * 200 and not report.lag_bytes_exact  # counted by file from a GTID
    assert 29 * 60 < report.lag_seconds < 31 * 60
    assert report.retained_bytes >= report.lag_bytes and report.oldest_binlog
    html = client.get(fragment).content.decode()
    assert 'data-status="lagging"' in html and 'data-transactions="40"' in html
    assert "of binlog behind (threshold 1000 bytes)" in html

    assert slots.check_slots(force=True) == 1
    assert slots.check_slots(force=True) == 0  # once per episode
    lagging = Event.objects.get(kind=slots.LAGGING)
    assert lagging.severity == "WARNING" and "of binlog behind" in lagging.message

    commit(capture, here(capture), minutes_ago=1)  # the next run read up to the server's position
    assert slots.check_slots(force=True) == 1
    assert Event.objects.get(kind=slots.OK).message.endswith("the binlog position is no longer lagging.")


def test_a_file_position_counts_exact_bytes_and_a_purged_one_is_lost(capture):
    flow = capture["flow"]
    with capture["conn"].cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, offset = cur.fetchone()[:2]
    commit(capture, cdc_mysql.FilePosition(file, int(offset)).text(), minutes_ago=5)
    run(capture, "INSERT INTO shop.customers VALUES (1000, REPEAT('y', 250)), (1002, REPEAT('y', 250))")
    run(capture, "UPDATE shop.customers SET name = REPEAT('w', 300)")
    with capture["conn"].cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        now = int(cur.fetchone()[1])
    report = slots.read(flow, fresh=True)
    assert report.lag_bytes == now - int(offset) and report.lag_bytes_exact
    assert report.lag_transactions is None and report.status == "lagging"

    gtid = here(capture)  # a GTID position in the files about to be purged
    run(capture, "INSERT INTO shop.customers VALUES (1001, 'z')")
    run(capture, "FLUSH BINARY LOGS")
    with capture["conn"].cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        newest = cur.fetchone()[0]
    purge(capture, newest)
    report = slots.read(flow, fresh=True)
    assert report.status == "lost" and report.needs_resnapshot and newest != file
    assert "no longer has the binlog" in report.message and report.oldest_binlog == newest
    assert slots.judge(flow, report) == 1 and Event.objects.get(kind=slots.LOST).severity == "ERROR"

    commit(capture, gtid, minutes_ago=1)
    report = slots.read(flow, fresh=True)
    assert report.status == "lost" and report.lag_bytes is None and report.lag_transactions == 1

    # A new snapshot under way, in key chunks: its stream position is in the files kept.
    commit(capture, join(here(capture), Progress(("7",), 16)), minutes_ago=1)
    report = slots.read(flow, fresh=True)
    assert report.status == "ok" and report.lag_bytes == 0
    assert report.snapshots == [f"{capture['name']}.customers: 16 rows read so far, up to key (7)"]
