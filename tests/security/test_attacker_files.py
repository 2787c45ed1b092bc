"""Mallory names folders, globs and reader options inside her source node and tries every
spelling that once led outside it: to the portal's master key, to /etc, to another team's
files. Each is refused at save (400 naming the key), and a run is refused where the files are
touched: the worker resolves what a flow would read to real paths inside the node before Spark
sees them, reads nothing, leaves nothing in the work area and says nothing about what lies
outside.

The stories that run a job start Spark in this process, whose heartbeat thread reads the job on a
connection of its own: they use a transactional database, so the job's row is there to read."""

from __future__ import annotations

import pytest

from portal.crypto.master import create_ring_file
from portal.flows.models import FlowConfig
from portal.keys.checks import check_master_key
from tests.builders.api import api_client_for
from tests.builders.world import World, files_under
from tests.factories import UserFactory

OUT_OF_THE_NODE = {
    "source.files.datasets": [
        "../../../../outside",
        "orders/../../../etc",
        "/etc",
        "orders,../portal-secrets",  # a list with one bad entry
        "%2e%2e",
        "..\\portal-secrets",
        "~root",
        "file:/etc",
    ],
    "source.files.glob": ["../../*", "../portal-secrets/*", "%2e%2e/*", "/etc/*"],
    "source.files.option.avroSchemaUrl": [
        "../portal-secrets/master-key",
        "/etc/passwd",
        "http://127.0.0.1:8000/admin/",
        "file:///etc/passwd",
    ],
    "source.files.option.basePath": ["/etc"],
    "source.files.option.path": ["/etc/passwd"],
    "source.files.option.badRecordsPath": ["/tmp/x"],
    # the folder the picker sets to chain flows (an upstream flow's output below the node's root)
    "source.files.folder": ["../portal-secrets", "orders/../../x", "/etc", "file:/etc"],
}
VECTORS = [(key, value) for key, values in OUT_OF_THE_NODE.items() for value in values]


def _master_key_text(world: World) -> str:
    return world.master_key.read_text().strip()


def _nothing_left(world: World) -> None:
    assert files_under(world.lake / "mal") == []
    assert not (world.tmp / "work" / "mal").exists()


@pytest.mark.parametrize(("key", "value"), VECTORS)
def test_a_name_leading_out_of_the_source_node_is_refused_at_save_naming_the_key(world: World, key, value):
    response = world.post_flow({key: value})
    assert response.status_code == 400, response.content
    assert repr(key) in str(response.json())
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="other").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("source.files.datasets", "../portal-secrets"),
        ("source.files.glob", "../*"),
        ("source.files.option.avroSchemaUrl", "/etc/passwd"),
        ("source.files.option.basePath", "/"),
        ("source.files.folder", "../portal-secrets"),
    ],
)
def test_a_tampered_name_is_refused_on_the_worker_and_nothing_is_read(world: World, key, value):
    execution, spec = world.bound_spec()
    spec["properties"][key] = value
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED"
    assert repr(key) in job.message
    _nothing_left(world)


def test_the_master_key_through_a_symlinked_file_is_not_read(transactional_db, world: World):
    (world.landing / "orders" / "key.csv").symlink_to(world.master_key)
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED", (job.status, job.message)
    assert "leads outside its data node" in job.message
    assert str(world.master_key) not in job.message  # no word on where the link leads
    assert _master_key_text(world) not in job.message + job.log_excerpt
    _nothing_left(world)


def test_a_symlinked_dataset_folder_out_of_the_node_is_not_read(transactional_db, world: World):
    (world.landing / "secrets").symlink_to(world.master_key.parent)
    execution, spec = world.bound_spec()
    spec_props = spec["properties"]
    assert "source.files.datasets" not in spec_props  # every folder: the link is among them
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "dataset folder 'secrets'" in job.message
    assert str(world.master_key.parent) not in job.message
    _nothing_left(world)


def test_a_chained_folder_linked_out_of_the_node_is_not_read(transactional_db, world: World):
    """The folder a downstream flow reads (an upstream flow's output) is resolved inside the node
    first: a link named like a flow's folder that leads to the portal's secrets reads nothing."""
    (world.landing / "upstream").symlink_to(world.master_key.parent)
    execution, spec = world.bound_spec()
    spec["properties"]["source.files.folder"] = "upstream"
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "leads outside its data node" in job.message, job.message
    assert str(world.master_key.parent) not in job.message
    _nothing_left(world)


def test_a_symlink_from_one_dataset_into_another_inside_the_node_is_read(transactional_db, world: World):
    (world.landing / "more").mkdir()
    (world.landing / "more" / "part-2.csv").write_text("id,amount\n2,20\n")
    (world.landing / "orders" / "alias.csv").symlink_to(world.landing / "orders" / "part-1.csv")
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "COMMITTED", job.message
    published = "".join(p.read_text() for p in files_under(world.lake / "mal"))
    assert published.count("1,10") == 2 and "2,20" in published


def test_a_missing_folder_outside_and_inside_answer_alike(world: World):
    """No oracle: a name outside is refused for its spelling, before anything is looked up."""
    outside = world.post_flow({"source.files.datasets": "../portal-secrets"}).json()
    missing = world.post_flow({"source.files.datasets": "../no-such-folder"}).json()
    assert str(outside).replace("portal-secrets", "X") == str(missing).replace("no-such-folder", "X")


def test_a_reader_option_from_the_allowed_list_is_used(transactional_db, world: World):
    (world.landing / "orders" / "part-1.csv").write_text("id;amount\n1;NA\n")
    world.mallory_flow.properties.update(
        {"source.files.option.sep": ";", "source.files.option.nullValue": "NA"}
    )
    world.mallory_flow.save()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "COMMITTED", job.message
    published = "".join(p.read_text() for p in files_under(world.lake / "mal"))
    assert "1," in published and "NA" not in published


def test_a_reader_option_file_linked_out_of_the_node_is_not_read(transactional_db, world: World):
    (world.landing / "schemas").mkdir()
    (world.landing / "schemas" / "leak.avsc").symlink_to(world.master_key)
    execution, spec = world.bound_spec()
    spec["properties"]["source.files.option.avroSchemaUrl"] = "schemas/leak.avsc"
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "leads outside its data node" in job.message
    assert _master_key_text(world) not in job.message + job.log_excerpt
    _nothing_left(world)


# --- the portal's private folders, both ways ---------------------------------------------------------


@pytest.mark.parametrize("inside", ["work", "logs"])
def test_no_data_node_lies_inside_the_portals_work_area_or_logs(world: World, settings, inside):
    settings.FLOWPORT_LOG_DIR = str(world.tmp / "logs")
    (world.tmp / inside / "mal" / "grab").mkdir(parents=True)
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    body = {"name": "peek", "kind": "files", "properties": {"path": str(world.tmp / inside / "mal")}}
    response = staff.post("/api/datanodes", body, format="json")
    assert response.status_code == 400, response.content
    assert "lies inside the portal's" in str(response.json())


def test_no_data_node_lies_in_the_portals_state_folder_outside_its_data_folder(world: World, settings):
    settings.VAR_DIR = world.tmp / "var"
    settings.FLOWPORT_DATA_DIR = world.tmp / "var" / "data"
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    refused = {"name": "state", "kind": "files", "properties": {"path": str(world.tmp / "var" / "static")}}
    response = staff.post("/api/datanodes", refused, format="json")
    assert response.status_code == 400 and "FLOWPORT_VAR_DIR" in str(response.json())
    allowed = {"name": "shared", "kind": "files", "properties": {"path": "shared"}}  # under the data folder
    assert staff.post("/api/datanodes", allowed, format="json").status_code == 201, "a data folder node"


def test_the_portal_does_not_start_with_its_master_key_inside_the_data_folder(world: World, settings):
    assert check_master_key() == []
    settings.FLOWPORT_DATA_DIR = world.tmp / "data"
    inside = world.tmp / "data" / "master-key"
    inside.parent.mkdir()
    create_ring_file(inside)
    settings.FLOWPORT_MASTER_KEY_FILE = str(inside)
    assert [message.id for message in check_master_key()] == ["keys.E005"]
