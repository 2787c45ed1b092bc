"""An operator watches a cdc flow that forks one table's changes to two destinations, each keeping
its own position: the slot card measures the lag from the destination furthest behind (and shows no
lag before both have a position), and asking for a new snapshot clears both destinations'
positions."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from portal.flows import services as flow_services
from portal.monitoring import slots
from portal.orchestration.control import cdc as control_cdc
from portal.orchestration.models import DatasetState
from portal.pipeline.cdc import pg as cdc_pg
from portal.topology import services as topology
from tests.builders.cdc_slots import shop as shop  # fixture
from tests.factories import UserFactory
from tests.pg_logical import logical_pg  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def fork(shop, settings):
    settings.CDC_SLOT_CACHE_SECONDS = 60
    cache.clear()
    owner = UserFactory(username="olga")
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    for name in ("lake", "archive"):
        topology.create_data_node({"name": name, "kind": "files", "properties": {"path": f"/tmp/{name}"}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[1]", "queue": "q.cdc"},
        capabilities=[("shopdb", "lake"), ("shopdb", "archive")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "customers-fork",
            "source": "shopdb",
            "destinations": ["lake", "archive"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
            },
            "paused": True,
        },
    )
    jobs = {
        plan["properties"]["flowport.hop.destination"]: plan["jobName"]
        for plan in flow.compiled_dag.dag["jobs"]
    }
    return {"flow": flow, "owner": owner, "jobs": jobs, "db": shop["db"]}


def _commit(fork, destination: str) -> int:
    """The destination's job committed the table at the server's position now."""
    db, flow = fork["db"], fork["flow"]
    here = db.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    DatasetState.objects.update_or_create(
        flow_id=flow.pk,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        job_name=fork["jobs"][destination],
        dataset_urn="shop.customers",
        defaults={"watermark": here},
    )
    return cdc_pg.parse_lsn(here)


def test_the_lag_is_the_lagging_destinations_and_a_new_snapshot_clears_both(fork):
    flow, db = fork["flow"], fork["db"]
    assert sorted(fork["jobs"]) == ["archive", "lake"]
    cdc_pg.ensure(db, cdc_pg.slot_name(flow.pk, "shop", "customers-fork"), ["shop.customers"], "shopdb")
    behind = _commit(fork, "archive")
    db.execute("INSERT INTO shop.customers SELECT g, repeat('x', 200) FROM generate_series(1, 500) g")
    report = slots.read(flow, fresh=True)  # the lake has no position yet: measured from the slot
    assert report is not None and report.status in ("ok", "lagging")
    ahead = _commit(fork, "lake")
    assert ahead > behind
    report = slots.read(flow, fresh=True)
    assert report is not None and report.lag_bytes is not None
    assert report.lag_bytes >= ahead - behind  # from the archive's position, not the lake's

    assert control_cdc.resnapshot(flow, user=fork["owner"]) == ["shop.customers"]
    marks = DatasetState.objects.filter(flow_id=flow.pk).values_list("job_name", "watermark")
    assert sorted(marks) == sorted((job, "") for job in fork["jobs"].values())
