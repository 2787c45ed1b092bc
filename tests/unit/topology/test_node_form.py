"""Staff fill in a data node with the fields of its kind (label, help that
says which pipeline keys a field sets, secrets typed into password boxes and
stored encrypted) instead of a key=value box; changing the kind swaps the
fields in (htmx)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from portal.crypto.encrypted import decrypt_properties
from portal.keys.models import CustomerKey
from portal.topology import nodefields
from portal.topology.models import DataNode
from portal.topology.topologyfile import TopologyFileError, sync_topology_file
from tests.builders.api import api_client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def test_a_new_node_shows_the_fields_of_its_kind_and_swaps_them_when_the_kind_changes(staff_client):
    page = staff_client.get("/topology/datanodes/new/").content.decode()
    assert "Root folder" in page and "Sets source.files.path, data.publisher.final.dir." in page
    assert "JDBC URL" not in page and 'hx-post="?part=fields"' in page

    swapped = staff_client.post(
        "/topology/datanodes/new/?part=fields", {"name": "sales-db", "kind": "jdbc", "conn_path": "x"}
    )
    page = swapped.content.decode()
    assert swapped.status_code == 200 and "JDBC URL" in page and "JDBC driver class" in page
    assert "Sets source.jdbc.url, writer.jdbc.url." in page and "Root folder" not in page
    assert 'value="sales-db"' in page and "This field is required" not in page
    assert not DataNode.objects.exists()


def test_staff_create_a_jdbc_node_from_its_fields_and_other_properties(staff_client):
    response = staff_client.post(
        "/topology/datanodes/new/",
        {
            "name": "sales-db",
            "kind": "jdbc",
            "conn_url": "jdbc:postgresql://db.example.org:5432/sales",
            "conn_driver": "org.postgresql.Driver",
            "properties_text": "fetchsize=100",
        },
    )
    assert response.status_code == 302
    assert DataNode.objects.get(name="sales-db").properties == {
        "url": "jdbc:postgresql://db.example.org:5432/sales",
        "driver": "org.postgresql.Driver",
        "fetchsize": "100",
    }


def test_mistakes_are_reported_at_the_field_they_concern(staff_client):
    url = "/topology/datanodes/new/"
    response = staff_client.post(url, {"name": "db", "kind": "jdbc"})
    assert response.status_code == 400 and "conn_url" in response.context["form"].errors

    response = staff_client.post(
        url, {"name": "lake", "kind": "files", "conn_path": str(django_settings.VAR_DIR)}
    )
    assert response.status_code == 400
    assert "contains the portal" in response.context["form"].errors["conn_path"][0]

    response = staff_client.post(
        url,
        {
            "name": "db",
            "kind": "jdbc",
            "conn_url": "jdbc:postgresql://h/d",
            "properties_text": "url=jdbc:postgresql://x/y",
        },
    )
    assert response.status_code == 400
    assert "has its own field above" in response.context["form"].errors["properties_text"][0]
    assert not DataNode.objects.exists()


def test_a_secret_field_is_a_password_box_whose_typed_value_is_stored_encrypted(
    staff_client, staff, master_key
):
    url = "/topology/datanodes/new/"
    page = staff_client.post(url + "?part=fields", {"kind": "jdbc"}).content.decode()
    assert 'type="password" name="conn_password"' in page and "Encrypted before it is stored" in page
    base = {
        "name": "events",
        "kind": "jdbc",
        "conn_url": "jdbc:postgresql://db.example.org:5432/events",
        "conn_user": "flowport",
    }
    assert staff_client.post(url, {**base, "conn_password": "hunter2"}).status_code == 302
    stored = DataNode.objects.get(name="events").properties
    assert stored["password"].startswith("ENC(") and "hunter2" not in str(stored)
    key = CustomerKey.objects.get(owner_user=staff)  # made for them: they had none
    assert stored["encrypt.wrapped.key"] == key.wrapped_key
    assert decrypt_properties(stored)["password"] == "hunter2"
    edit = staff_client.get("/topology/datanodes/events/edit/").content.decode()
    assert "hunter2" not in edit and stored["password"] not in edit  # never sent back
    kept = {**base, "conn_password": ""}
    assert staff_client.post("/topology/datanodes/events/edit/", kept).status_code == 302
    assert DataNode.objects.get(name="events").properties == stored  # left empty: kept


def test_kinds_no_job_can_run_are_not_offered_but_a_node_stored_as_one_still_edits(staff_client):
    page = staff_client.get("/topology/datanodes/new/").content.decode()
    assert '<option value="jdbc">' in page and '<option value="other">' in page
    assert 'value="kafka"' not in page and 'value="hive"' not in page
    refused = staff_client.post(
        "/topology/datanodes/new/", {"name": "events", "kind": "kafka", "conn_bootstrap.servers": "k:9092"}
    )
    assert refused.status_code == 400 and "kind" in refused.context["form"].errors
    assert not DataNode.objects.exists()

    DataNode.objects.create(name="clicks", kind="kafka", properties={"bootstrap.servers": "k1:9092"})
    edit = staff_client.get("/topology/datanodes/clicks/edit/").content.decode()
    assert '<option value="kafka" selected>Kafka (not yet runnable)</option>' in edit
    assert 'value="hive"' not in edit
    kept = {"kind": "kafka", "conn_bootstrap.servers": "k1:9092,k2:9092", "description": "clicks"}
    assert staff_client.post("/topology/datanodes/clicks/edit/", kept).status_code == 302
    assert DataNode.objects.get(name="clicks").properties == {"bootstrap.servers": "k1:9092,k2:9092"}
    DataNode.objects.create(name="lake", kind="files", properties={"path": "lake"})
    changed = staff_client.post("/topology/datanodes/lake/edit/", {"kind": "kafka", "conn_path": "lake"})
    assert changed.status_code == 400 and DataNode.objects.get(name="lake").kind == "files"


def test_the_api_and_the_topology_file_refuse_a_new_node_of_a_kind_no_job_runs(staff, tmp_path):
    response = api_client_for(staff).post(
        "/api/datanodes",
        {"name": "events", "kind": "hive", "properties": {"metastore.uris": "thrift://m:9083"}},
        format="json",
    )
    assert response.status_code == 400
    assert "hive: no Flowport source reads and no destination writes" in response.json()["kind"][0]
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "dataNodes:\n  - {name: events, kind: kafka, properties: {bootstrap.servers: 'k:9092'}}\n"
    )
    with pytest.raises(TopologyFileError, match="kafka: no Flowport source reads"):
        sync_topology_file(topology)
    DataNode.objects.create(name="events", kind="kafka", properties={"bootstrap.servers": "k:9092"})
    sync_topology_file(topology)  # a node stored as one before keeps loading
    assert DataNode.objects.get(name="events").kind == "kafka"


def test_editing_splits_the_stored_properties_into_fields_and_other_properties(staff_client):
    DataNode.objects.create(
        name="db", kind="jdbc", properties={"url": "jdbc:postgresql://h/d", "fetchsize": "5"}
    )
    form = staff_client.get("/topology/datanodes/db/edit/").context["form"]
    assert form["conn_url"].value() == "jdbc:postgresql://h/d"
    assert form["properties_text"].value() == "fetchsize=5"


def test_every_field_sets_only_keys_the_property_schema_gives_to_the_nodes():
    for kind, fields in nodefields.FIELDS.items():
        for field in fields:
            assert nodefields.node_owned(field), (kind, field.key)
    assert [f.key for f in nodefields.fields_of("jdbc") if f.secret] == ["password"]
