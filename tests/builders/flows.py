"""The flows the flow stories save, through the form and through /api/flowconfigs, and the
topology and packs those flows name: a save refuses a data node or a template that is not
there, so each story sets up what its flow needs.

`nodes` and `packs` are autouse fixtures: a test module that imports them by name makes them
its own (the API stories' setup)."""

from __future__ import annotations

import pytest

from portal.topology import services as topology
from tests.unit.templatepacks.factories import SALES_TEMPLATES, make_pack
from tests.unit.topology.helpers import executor

# --- the form's stories: pg-sales → lake → archive and the sales pack -----------------

ATTRIBUTES_TEMPLATE = """\
gobblin.template.required_attributes = "source.jdbc.tables,source.jdbc.schema,flowport.hop.destination.path"
flowport.attribute.source.jdbc.tables.description = "Tables to pull, comma-separated"
flowport.attribute.source.jdbc.tables.default = "orders"
source.jdbc.schema = "jdbc:postgresql://db/sales"
writer.output.format = parquet
"""

JDBC = "pack://sales-pack/ingest/jdbc.template"


def make_topology_nodes() -> None:
    """pg-sales (jdbc) → lake → archive, each with a description."""
    for name, kind, description, props in (
        ("pg-sales", "jdbc", "Sales orders in PostgreSQL", {"url": "jdbc:postgresql://db/sales"}),
        ("lake", "files", "Parquet lake on the shared disk", {"path": "var/data/lake"}),
        ("archive", "files", "Cold archive", {"path": "var/data/archive"}),
    ):
        topology.create_data_node(
            {"name": name, "kind": kind, "description": description, "properties": props}
        )
    executor("ingest", "pg-sales>lake")
    executor("replicate", "lake>archive")


def make_sales_pack(owner):
    """The sales pack (base + ingest/jdbc, which requires source.jdbc.schema and
    source.jdbc.tables) plus an attribute-documented template."""
    return make_pack(owner, templates={**SALES_TEMPLATES, "ingest/documented.template": ATTRIBUTES_TEMPLATE})


def new_flow(**changes) -> dict:
    """The form's fields for a runnable flow from pg-sales to lake and archive (None drops one)."""
    form = {
        "flow_group": "sales",
        "flow_name": "orders",
        "description": "Orders into the lake, then the archive",
        "source": "pg-sales",
        "destinations": ["lake", "archive"],
        "template_uris": JDBC,
        "attr:source.jdbc.schema": "jdbc:postgresql://db/sales",
        "attr:source.jdbc.tables": "orders",
        "schedule": "*/10 * * * *",
        "run_immediately": "on",
        "prop-0-key": "extract.delta.fields",
        "prop-0-value": "updated_at",
        "prop-1-key": "",
        "prop-1-value": "",
    }
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


def without_template(**changes) -> dict:
    """No template: the flow's own properties say what the JDBC source reads."""
    plain = new_flow(template_uris="", **{"properties_text": "source.jdbc.tables=orders", **changes})
    return {k: v for k, v in plain.items() if not k.startswith("attr:")}


# --- the API's stories: pg-orders → lake, archive -------------------------------------

RUNNABLE = {"source.jdbc.tables": "orders", "source.jdbc.schema": "public", "extract.is.full": "true"}


@pytest.fixture(autouse=True)
def nodes(db):
    """The data nodes the flows name (a save refuses a name that is no data node)."""
    for name, kind, props in (
        ("pg-orders", "jdbc", {"url": "jdbc:postgresql://db/sales"}),
        ("lake", "files", {"path": "var/data/lake"}),
        ("archive", "files", {"path": "var/data/archive"}),
    ):
        topology.create_data_node({"name": name, "kind": kind, "properties": props})


@pytest.fixture(autouse=True)
def packs(owner):
    """The packs the owner's flows use: the team's and GaaS's example's."""
    make_pack(owner)
    make_pack(owner, "seed", {"mytemplate.template": "a = 1"})


def flow_body(**overrides) -> dict:
    body = {
        "flowGroup": "sales",
        "flowName": "orders",
        "schedule": "*/15 * * * *",
        "runImmediately": False,
        "templateUris": "pack://sales-pack/ingest/jdbc.template",
        "properties": dict(RUNNABLE),
        "source": "pg-orders",
        "destinations": ["lake"],
    }
    body.update(overrides)
    return body


# --- the README's demo: landing → lake → archive and the demo pack ---------------------

DEMO_TEMPLATE = """\
gobblin.template.required_attributes = "source.files.format"
writer.output.format = parquet
"""


def readme_body(**changes) -> dict:
    """The README's curl example."""
    body = {
        "flowGroup": "mygroup",
        "flowName": "myflow1",
        "schedule": "0 */6 * * *",
        "templateUris": "pack://demo-pack/ingest/files.template",
        "source": "landing",
        "destinations": ["archive"],
        "properties": {"source.files.format": "csv"},
    }
    return {**body, **changes}
