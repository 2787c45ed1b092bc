"""Mallory makes an Iceberg destination of her own: its SQL catalog is a file in her area, which she
may rewrite as she likes. The catalog names where the table's metadata is, and the metadata where
the table lies: she points them at the portal's secrets (to read them back in her run's error) and
at victor's area (to write into it, or to have the run clear what is there). Every location the
catalog gives is confined to her node's warehouse before anything is read or written, and the
refusal quotes nothing of the file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from django.test import Client

from portal.flows.models import FlowConfig
from portal.orchestration.state import joblogs
from portal.topology import services as topology
from portal.topology.models import SpecExecutor
from tests.builders.world import World, files_under

ADMIN_PASSWORD = "flowport-demo-admin-Pa55"


@pytest.fixture
def her_lake(transactional_db, world: World, settings) -> dict[str, Path]:
    """Her Iceberg node (catalog and warehouse in her area), victor's area beside it, and a flow of
    hers that has committed once into a table of her catalog."""
    data = world.tmp / "data"
    victors = data / "users" / "victor" / "lake"
    victors.mkdir(parents=True)
    (victors / "keep.parquet").write_text("victor's")
    (data / "users" / "mallory").mkdir(parents=True)
    settings.FLOWPORT_DATA_DIR = data
    topology.update_executor(SpecExecutor.objects.get(name="x1"), {"user_destinations": "files,iceberg"})
    made = world.api().post(
        "/api/datanodes",
        {
            "name": "her-lake",
            "kind": "iceberg",
            "properties": {
                "catalog.uri": "sqlite:///users/mallory/catalog.db",
                "warehouse": "users/mallory/wh",
            },
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    secret = world.tmp / "portal-secrets" / "admin-password"
    secret.write_text(ADMIN_PASSWORD + "\n")
    flow = FlowConfig.objects.create(
        flow_group="mal",
        flow_name="ice",
        owner=world.mallory,
        source="landing",
        destinations=["her-lake"],
        properties={"source.files.format": "csv", "writer.iceberg.table": "orders"},
    )
    first = run(world, flow)
    assert first.status == "COMMITTED", first.message
    return {
        "catalog": data / "users/mallory/catalog.db",
        "warehouse": data / "users/mallory/wh",
        "victors": victors,
        "secret": secret,
    }


def run(world: World, flow: FlowConfig | None = None):
    """One run of her flow over a new file of the landing folder (rows to publish)."""
    flow = flow or FlowConfig.objects.get(flow_group="mal", flow_name="ice")
    new = len(list((world.landing / "orders").iterdir())) + 1
    (world.landing / "orders" / f"part-{new}.csv").write_text(f"id,amount\n{new},{new}0\n")
    execution, spec = world.bound_spec(flow)
    return world.run_on_worker(spec, execution)


def point_catalog(catalog: Path, metadata: str) -> None:
    """Her hand on her own catalog: the table's row names another metadata file."""
    with sqlite3.connect(catalog) as db:
        db.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = 'orders'", (metadata,))


def current_metadata(catalog: Path) -> Path:
    with sqlite3.connect(catalog) as db:
        (location,) = db.execute("SELECT metadata_location FROM iceberg_tables").fetchone()
    return Path(location.removeprefix("file://"))


def everything_she_is_shown(world: World, job) -> str:
    """The job's message, its log and the execution's page."""
    log = Path(joblogs.log_path(job.execution.execution_id, job.job_name, job.attempt))
    browser = Client()
    browser.force_login(world.mallory)
    page = browser.get(f"/executions/mal/ice/{job.execution.execution_id}/")
    assert page.status_code == 200
    return "\n".join([job.message, log.read_text(), page.content.decode()])


def test_her_catalog_cannot_make_the_run_read_a_file_outside_her_warehouse(world: World, her_lake):
    link = her_lake["warehouse"] / "link.metadata.json"  # a link she leaves in her own warehouse
    link.symlink_to(her_lake["secret"])
    for where in (her_lake["secret"], Path("/etc/passwd"), link):
        point_catalog(her_lake["catalog"], f"file://{where}")
        job = run(world)
        assert job.status == "FAILED", (where, job.message)
        assert "outside the destination's warehouse" in job.message, job.message
        shown = everything_she_is_shown(world, job)
        assert ADMIN_PASSWORD not in shown and "root:x:0" not in shown, where
    # Inside her warehouse, a file that is no metadata: the parser's words would quote it.
    junk = her_lake["warehouse"] / "junk.metadata.json"
    junk.write_text("not-metadata-but-a-quoted-line\n")
    point_catalog(her_lake["catalog"], f"file://{junk}")
    job = run(world)
    assert job.status == "FAILED"
    assert "is not Iceberg table metadata" in job.message, job.message
    assert "not-metadata-but-a-quoted-line" not in everything_she_is_shown(world, job)


FORGED = [  # what her metadata changes, and the write mode that would touch it
    ("location", "append"),
    ("location", "overwrite"),
    ("location", "merge"),
    ("location", "history"),
    ("write.data.path", "merge"),
    ("manifest-list", "overwrite"),
]


def test_her_metadata_cannot_make_the_run_touch_victors_area(world: World, her_lake):
    """The table's location (where the run's files go and what a retry clears), the folder new data
    files are written to, a snapshot's manifest list (read and rewritten by an overwrite)."""
    victors = f"file://{her_lake['victors']}"
    original = json.loads(current_metadata(her_lake["catalog"]).read_text())
    flow = FlowConfig.objects.get(flow_group="mal", flow_name="ice")
    for forge, mode in FORGED:
        metadata = json.loads(json.dumps(original))
        if forge == "location":
            metadata["location"] = victors
        elif forge == "write.data.path":
            metadata["properties"][forge] = victors
        else:
            metadata["snapshots"][-1]["manifest-list"] = f"{victors}/keep.parquet"
        forged = her_lake["warehouse"] / f"forged-{forge}-{mode}.metadata.json"
        forged.write_text(json.dumps(metadata))
        point_catalog(her_lake["catalog"], f"file://{forged}")
        flow.properties = {**flow.properties, "writer.write.mode": mode, "extract.primary.key.fields": "id"}
        flow.save()
        job = run(world, flow)
        assert job.status == "FAILED", (forge, mode, job.message)
        assert "outside the destination's warehouse" in job.message, (forge, mode, job.message)
        assert files_under(her_lake["victors"]) == [her_lake["victors"] / "keep.parquet"], (forge, mode)
        assert (her_lake["victors"] / "keep.parquet").read_text() == "victor's"
