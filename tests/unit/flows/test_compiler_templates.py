"""The compiler with template packs: resolved properties in each job, and
resolution problems reported per job instead of raised."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from portal.flows import services as flow_services
from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.templatepacks import services as packs
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

TEMPLATE = """
gobblin.template.required_attributes = "source.jdbc.tables,flowport.hop.destination.path"
writer.output.format = parquet
source.jdbc.fetchsize = "1000"
"""


@pytest.fixture
def pack(owner):
    pack = packs.create_pack(user=owner, name="team")
    packs.save_template(pack, user=owner, path="ingest/jdbc.template", text=TEMPLATE)
    return pack


@pytest.fixture
def topology():
    nodes("db", kind="jdbc")
    nodes("lake")
    executor("x1", "db>lake")


def flow_for(owner, **fields):
    defaults = {"destinations": ["lake"], "template_uris": "pack://team/ingest/jdbc.template"}
    return FlowConfigFactory.build(
        flow_group="g", flow_name="f", source="db", owner=owner, **{**defaults, **fields}
    )


def test_job_properties_are_template_then_flow_then_hop(owner, pack, topology):
    flow = flow_for(owner, properties={"source.jdbc.tables": "orders", "source.jdbc.fetchsize": "50"})
    compiled = compile_flow(flow)
    assert compiled.status == "COMPILED", compiled.message
    [job] = compiled.jobs
    assert job.properties["writer.output.format"] == "parquet"
    assert job.properties["source.jdbc.fetchsize"] == "50"
    assert job.properties["flowport.hop.destination.path"] == "var/data/lake"
    assert compiled.pinned_versions == {"pack://team/ingest/jdbc.template": 1}


def test_required_attributes_are_checked_per_job_after_hop_keys(owner, pack):
    nodes("db", "stream", kind="jdbc")
    nodes("lake")
    executor("x1", "db>lake", "db>stream")
    flow = flow_for(owner, destinations=["lake", "stream"], properties={"source.jdbc.tables": "orders"})
    compiled = compile_flow(flow)
    assert compiled.status == "FAILED"
    errors = {job.job_name: job.errors for job in compiled.jobs}
    # The lake is a files node with a path; the jdbc node has none.
    assert errors == {
        "g.f.1-db-to-lake": [],
        "g.f.1-db-to-stream": ["flowport.hop.destination.path is required by the chosen template."],
    }


def test_unknown_template_is_reported_on_every_job(owner, topology):
    compiled = compile_flow(flow_for(owner, template_uris="pack://team/nope.template"))
    assert compiled.status == "FAILED"
    [job] = compiled.jobs
    assert len(job.errors) == 1
    assert job.errors[0].startswith("template pack://team/nope.template:")
    assert compiled.message == f"g.f.1-db-to-lake: {job.errors[0]}"


def test_template_errors_without_jobs_are_reported_for_the_flow(owner):
    nodes("db", "lake")
    compiled = compile_flow(flow_for(owner, template_uris="pack://team/nope.template"))
    assert compiled.status == "FAILED"
    assert compiled.errors[0].startswith("template pack://team/nope.template:")
    assert compiled.pending_reasons == [
        "db → lake: missing hop out of db (no enabled executor reads from it)"
    ]


def test_outsider_cannot_compile_with_a_pack_they_cannot_read(owner, pack, topology):
    outsider = UserFactory(username="eve")
    flow = flow_for(outsider, properties={"source.jdbc.tables": "orders"})
    compiled = compile_flow(flow)
    assert compiled.status == "FAILED"
    assert "pack://team/ingest/jdbc.template" in compiled.jobs[0].errors[0]


def test_a_flow_missing_a_required_attribute_is_refused_at_save_naming_it(owner, pack, topology):
    """The compiler would record FAILED ("… is required by the chosen template."); the save refuses it."""
    data = {"flow_group": "g", "flow_name": "f", "source": "db", "destinations": ["lake"],
            "template_uris": "pack://team/ingest/jdbc.template", "properties": {}}  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        flow_services.create_flow(owner=owner, data=data)
    assert refused.value.message_dict == {
        "properties": ["source.jdbc.tables is required by the chosen template."]
    }
    assert not FlowConfig.objects.exists()
    assert compile_flow(FlowConfigFactory.build(owner=owner, **data)).job_errors == [
        "g.f.1-db-to-lake: source.jdbc.tables is required by the chosen template."
    ]
