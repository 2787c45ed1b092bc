"""An operator watches a change-data-capture flow's replication slot on a private
PostgreSQL server with ``wal_level=logical``: the flow page's card reads the slot's lag (bytes and
seconds) and the log the server keeps for it; the monitor raises an alert once when the lag passes
the flow's threshold, when no run read the slot for too long, and when the slot is gone, and says
once when each clears; the flow's "SLA miss" subscribers hear of it."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from portal.events.models import Event
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.monitoring import monitors, slots, subscriptions
from portal.monitoring.models import Subscription
from portal.orchestration.models import DatasetState
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc.pgoutput import parse_lsn
from portal.pipeline.cdc.snapshot import Progress, join
from portal.topology import services as topology
from tests.builders.cdc_slots import shop as shop  # fixture
from tests.builders.executions import make_execution
from tests.factories import FlowConfigFactory, UserFactory
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def capture(shop, settings):
    settings.CDC_SLOT_CACHE_SECONDS = 60
    cache.clear()
    owner = UserFactory(username="olivia")
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "/tmp/lake"}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc"},
        capabilities=[("shopdb", "lake")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "customers-log",
            "source": "shopdb",
            "destinations": ["lake"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
                "source.cdc.alert.lag.bytes": "1000",
            },
            "paused": True,
        },
    )
    job_name = flow.compiled_dag.dag["jobs"][0]["jobName"]
    return {"flow": flow, "owner": owner, "job": job_name, "db": shop["db"]}


def _commit_position(capture, *, minutes_ago: float) -> None:
    """A run that started ``minutes_ago`` committed the table at the server's position now."""
    db, flow = capture["db"], capture["flow"]
    execution = make_execution(flow, started=timezone.now() - timedelta(minutes=minutes_ago))
    here = db.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    DatasetState.objects.update_or_create(
        flow_id=flow.pk,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        job_name=capture["job"],
        dataset_urn="shop.customers",
        defaults={"watermark": here, "execution_id": execution.execution_id},
    )


def test_the_flow_page_shows_the_slots_lag_and_the_log_it_keeps(capture, client):
    flow, db = capture["flow"], capture["db"]
    client.force_login(capture["owner"])
    page = client.get(reverse("flows:detail", args=["shop", "customers-log"])).content.decode()
    fragment = reverse("monitoring:flow_slot", args=["shop", "customers-log"])
    assert 'id="slot"' in page and f'hx-get="{fragment}"' in page  # loaded apart: the page never waits

    first = client.get(fragment).content.decode()
    assert 'data-status="new"' in first and "the flow&#x27;s first run creates it" in first

    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-log")
    cdc_pg.ensure(db, slot, ["shop.customers"], "shopdb")
    _commit_position(capture, minutes_ago=30)
    db.execute("INSERT INTO shop.customers SELECT g, repeat('x', 200) FROM generate_series(1, 500) g")
    assert 'data-status="new"' in client.get(fragment).content.decode()  # cached briefly

    report = slots.read(flow, fresh=True)
    assert report is not None and report.status == "lagging" and report.lag_bytes > 100_000
    assert 29 * 60 < report.lag_seconds < 31 * 60  # since the run that read up to the position started
    assert report.retained_bytes >= report.lag_bytes and report.wal_status == "reserved"
    assert report.safe_wal_bytes is None  # the server keeps log for slots without bound
    html = client.get(fragment).content.decode()
    assert 'data-status="lagging"' in html and f'data-bytes="{report.lag_bytes}"' in html
    assert re.search(r"data-seconds=\"18\d\d\.\d+\">(29|30)m( \d+s)?</span> behind the source", html)
    assert "of log behind (threshold 1000 bytes)" in html


def test_a_lagging_idle_or_lost_slot_alerts_once_and_says_when_it_clears(capture, settings):
    flow, db, owner = capture["flow"], capture["db"], capture["owner"]
    Subscription.objects.create(user=owner, flow=flow, on_sla_miss=True, on_failure=False, by_email=True)
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-log")
    cdc_pg.ensure(db, slot, ["shop.customers"], "shopdb")
    _commit_position(capture, minutes_ago=5)
    db.execute("INSERT INTO shop.customers SELECT g, repeat('x', 200) FROM generate_series(1, 100) g")

    assert slots.check_slots(force=True) == 1
    assert slots.check_slots(force=True) == 0  # once per episode
    lagging = Event.objects.get(kind=slots.LAGGING)
    assert lagging.severity == "WARNING" and lagging.subject == slot and lagging.flow_name == "customers-log"
    assert "of log behind (threshold 1000 bytes)" in lagging.message
    assert subscriptions.wants(Subscription.objects.get(flow=flow), slots.LAGGING)

    _commit_position(capture, minutes_ago=1)  # the next run committed up to the server's position
    cdc_pg.advance(db, slot, parse_lsn(db.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]))
    assert slots.check_slots(force=True) == 1
    assert Event.objects.filter(kind=slots.OK).get().message.endswith("is no longer lagging.")
    db.execute("INSERT INTO shop.customers SELECT g, 'again' FROM generate_series(1000, 1100) g")
    assert slots.check_slots(force=True) == 1  # a new episode
    assert Event.objects.filter(kind=slots.LAGGING).count() == 2

    settings.CDC_ALERT_INACTIVE_SECONDS = 30
    assert slots.check_slots(force=True) == 1  # the last run started a minute ago
    idle = Event.objects.get(kind=slots.INACTIVE)
    assert "No run has read slot" in idle.message and "threshold 30 s" in idle.message

    db.execute("SELECT pg_drop_replication_slot(%s)", (slot,))  # a DBA cleans up
    assert slots.check_slots(force=True) == 1
    lost = Event.objects.get(kind=slots.LOST)
    assert (
        lost.severity == "ERROR"
        and "is missing on the server while the tables have positions" in lost.message
    )
    report = slots.read(flow)
    assert report is not None and report.needs_resnapshot and report.lag_bytes is None


def test_a_slot_the_server_gave_up_is_shown_lost(capture):
    flow, db = capture["flow"], capture["db"]
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-log")
    cdc_pg.ensure(db, slot, ["shop.customers"], "shopdb")
    _commit_position(capture, minutes_ago=5)
    db.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
    db.execute("SELECT pg_reload_conf()")
    try:
        assert slots.read(flow, fresh=True).safe_wal_bytes is not None  # a bound: shown on the page
        for step in range(3):
            db.execute("INSERT INTO shop.customers SELECT g + %s, repeat('x', 100) FROM generate_series(1, 20000) g",
                       (step * 100_000,))  # fmt: skip
            db.execute("SELECT pg_switch_wal()")
        db.execute("CHECKPOINT")
        report = slots.read(flow, fresh=True)
        assert report is not None and report.status == "lost" and report.wal_status == "lost"
        assert "max_slot_wal_keep_size" in report.message and report.needs_resnapshot
        assert slots.judge(flow, report) == 1 and Event.objects.get(kind=slots.LOST).severity == "ERROR"
    finally:
        db.execute("ALTER SYSTEM RESET max_slot_wal_keep_size")
        db.execute("SELECT pg_reload_conf()")


def test_an_unreachable_source_is_said_and_alerts_nothing(capture, settings, monkeypatch):
    settings.CDC_SLOT_TIMEOUT_SECONDS = 1
    nowhere = "jdbc:postgresql://127.0.0.1:1/nowhere"  # nothing listens on port 1
    topology.create_data_node({"name": "gonedb", "kind": "jdbc", "properties": {"url": nowhere}})
    topology.create_executor(
        {"name": "ingest2", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc2"},
        capabilities=[("gonedb", "lake")],
    )
    flow = flow_services.create_flow(
        owner=capture["owner"],
        data={
            "flow_group": "shop",
            "flow_name": "gone-log",
            "source": "gonedb",
            "destinations": ["lake"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
            },
            "paused": True,
        },
    )
    report = slots.read(flow, fresh=True)
    assert report is not None and report.status == "unreachable"
    assert report.message.startswith("The source server could not be read") and report.lag_bytes is None
    assert slots.judge(flow, report) == 0 and not Event.objects.filter(kind__startswith="cdc.").exists()
    assert {f.flow_name for f in slots.capturing_flows()} == {"customers-log", "gone-log"}

    # A pass that runs out of its time budget stops; the next goes on with the following flow.
    settings.CDC_SLOT_INTERVAL_SECONDS, settings.CDC_SLOT_BUDGET_SECONDS = 0, 0
    monkeypatch.setattr(slots, "_after_pk", 0)
    monkeypatch.setattr(slots, "_next_check", 0.0)
    cache.clear()
    slots.check_slots()
    assert [cache.get(slots._cache_key(f)) is not None for f in (capture["flow"], flow)] == [True, False]
    slots.check_slots()
    assert cache.get(slots._cache_key(flow)).status == "unreachable"


def test_a_lost_slot_is_taken_again_only_when_the_owner_asks(capture, client):
    flow, db, owner = capture["flow"], capture["db"], capture["owner"]
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-log")
    _commit_position(capture, minutes_ago=5)  # the tables have a position, the slot is gone
    client.force_login(owner)
    fragment = client.get(reverse("monitoring:flow_slot", args=["shop", "customers-log"])).content.decode()
    assert 'data-status="missing"' in fragment and 'data-test="resnapshot"' in fragment
    assert "Runs fail until you ask for a new snapshot" in fragment

    reader = UserFactory(username="rita")
    url = reverse("monitoring:flow_resnapshot", args=["shop", "customers-log"])
    client.force_login(reader)
    assert client.post(url).status_code in (403, 404)
    assert DatasetState.objects.get(flow_id=flow.pk).watermark != ""  # refused: nothing cleared

    client.force_login(owner)
    done = client.post(url, follow=True)
    assert "A new snapshot was asked for (shop.customers)" in done.content.decode()
    state = DatasetState.objects.get(flow_id=flow.pk)
    assert state.watermark == "" and state.last_status == "RESET"
    assert "a new snapshot was asked for" in state.history.get(status="RESET").reason
    report = slots.read(flow)  # the cached reading was dropped
    assert report is not None and report.status == "new" and db is not None and slot == report.slot

    api = reverse("flowconfig-resnapshot", args=["shop", "customers-log"])
    assert client.post(api).json() == {"cleared": []}  # nothing left to clear
    _commit_position(capture, minutes_ago=1)
    assert client.post(api).json() == {"cleared": ["shop.customers"]}
    plain = FlowConfigFactory(owner=owner, flow_group="shop", flow_name="plain")
    refused = client.post(reverse("flowconfig-resnapshot", args=["shop", "plain"]))
    assert refused.status_code == 400 and f"flow {plain} does not capture changes" in str(refused.json())


def test_a_snapshot_under_way_is_shown_and_its_stream_position_measures_the_lag(capture, client):
    """A table snapshotted in key chunks keeps its progress in its watermark: the card says how far
    the snapshot got, and the lag is measured from the stream position beside it."""
    flow, db = capture["flow"], capture["db"]
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-log")
    cdc_pg.ensure(db, slot, ["shop.customers"], "shopdb")
    _commit_position(capture, minutes_ago=2)
    state = DatasetState.objects.get(flow_id=flow.pk)
    state.watermark = join(state.watermark, Progress(("40",), 40))
    state.save()
    report = slots.read(flow, fresh=True)
    assert report is not None and report.status == "ok" and report.lag_bytes == 0
    assert report.snapshots == ["shop.customers: 40 rows read so far, up to key (40)"]
    client.force_login(capture["owner"])
    html = client.get(reverse("monitoring:flow_slot", args=["shop", "customers-log"])).content.decode()
    assert "Snapshot under way" in html and "40 rows read so far" in html


def test_the_monitor_finds_the_capturing_flows_on_either_database_and_fails_no_pass(
    owner, settings, monkeypatch, caplog
):
    """SQLite (`make run`'s database) has no JSON containment: the monitor still finds the flows
    that capture changes, passes over the rest, and its pass raises nothing for the scheduler to log."""
    settings.CDC_SLOT_TIMEOUT_SECONDS = 1
    nowhere = "jdbc:postgresql://127.0.0.1:1/nowhere"  # nothing listens on port 1
    topology.create_data_node({"name": "shopdb", "kind": "jdbc", "properties": {"url": nowhere}})
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "/tmp/lake"}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc"},
        capabilities=[("shopdb", "lake")],
    )
    for name, props in (
        ("customers-log", {"source.class": "portal.pipeline.sources.cdc.CdcSource"}),
        ("customers-nightly", {"extract.is.full": "true"}),
    ):
        flow_services.create_flow(
            owner=owner,
            data={
                "flow_group": "shop",
                "flow_name": name,
                "source": "shopdb",
                "destinations": ["lake"],
                "properties": {"source.jdbc.tables": "shop.customers", "source.cdc.tables": "shop.customers"}
                | props,
                "paused": True,
            },
        )
    FlowConfigFactory(owner=owner, flow_group="files", flow_name="plain")

    assert [flow.flow_name for flow in slots.capturing_flows()] == ["customers-log"]
    settings.CELERY_BROKER_URL = "memory://"  # the broker probe's broker, always there
    monkeypatch.setattr(monitors, "_next_run", 0.0)
    with caplog.at_level(logging.ERROR):
        report = monitors.run_monitors(force=True)
    assert report is not None and report.failed == [] and report.raised["replication slots"] == 0
    assert not [record for record in caplog.records if record.exc_info], caplog.text
    assert (
        cache.get(slots._cache_key(FlowConfig.objects.get(flow_name="customers-log"))).status == "unreachable"
    )
