"""Mallory writes into an Iceberg destination she was granted and names the namespace and table
her rows land in. A name is a folder under the warehouse, so every spelling that would lead out of
it (or into another team's table folder by path) is refused at save, and a run whose spec was
tampered past the save is refused by the writer before any file is written."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from portal.topology import services as topology
from tests.builders.world import World, files_under
from tests.unit.topology.helpers import executor as make_executor

ESCAPES = ["../team-v", "a/b", "..", "/etc", "%2e%2e", "a\\b", "x y"]


@pytest.fixture
def ice(world: World, settings):
    warehouse = world.tmp / "warehouse"
    grants = [{"role": "write", "user": "mallory"}]
    properties = {"catalog.uri": f"sqlite:///{world.tmp / 'catalog.db'}", "warehouse": str(warehouse)}
    topology.create_data_node({"name": "ice", "kind": "iceberg", "properties": properties, "acl": grants})
    make_executor("x3", "landing>ice", spark_master=settings.SPARK_MASTER)
    return warehouse


@pytest.mark.parametrize("key", ["writer.iceberg.namespace", "writer.iceberg.table"])
@pytest.mark.parametrize("name", ESCAPES)
def test_a_namespace_or_table_leading_out_of_the_warehouse_is_refused_at_save(world: World, ice, key, name):
    response = world.post_flow({key: name}, destinations=["ice"])
    assert response.status_code == 400, response.content
    assert key in str(response.json())
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="other").exists()


def test_a_tampered_table_name_writes_nothing_anywhere(transactional_db, world: World, ice):
    flow = FlowConfig.objects.create(
        flow_group="mal",
        flow_name="ice",
        owner=world.mallory,
        source="landing",
        destinations=["ice"],
        properties={"source.files.format": "csv"},
    )
    execution, spec = world.bound_spec(flow)
    spec["properties"]["writer.iceberg.table"] = "../../escaped"
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", job.message
    assert "writer.iceberg.table" in job.message and "plain name" in job.message
    assert files_under(ice) == []
    assert not (world.tmp / "escaped").exists()
