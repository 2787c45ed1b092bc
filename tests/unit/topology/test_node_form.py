"""Staff fill in a data node with the fields of its kind (label, help that
says which pipeline keys a field sets, secrets as ENC(...)) instead of a
key=value box; changing the kind swaps the fields in (htmx)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from portal.topology import nodefields
from portal.topology.models import DataNode

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


def test_a_secret_field_is_a_password_box_that_takes_only_ciphertext(staff_client):
    url = "/topology/datanodes/new/"
    page = staff_client.post(url + "?part=fields", {"kind": "kafka"}).content.decode()
    assert 'type="password" name="conn_sasl.password"' in page and "only as ENC(...)" in page
    base = {
        "name": "events",
        "kind": "kafka",
        "conn_bootstrap.servers": "kafka1:9092",
        "conn_sasl.username": "flowport",
    }
    response = staff_client.post(url, {**base, "conn_sasl.password": "hunter2"})
    assert response.status_code == 400
    assert "looks like a secret" in response.context["form"].errors["conn_sasl.password"][0]
    assert "hunter2" not in str(DataNode.objects.values_list("properties", flat=True))
    assert staff_client.post(url, {**base, "conn_sasl.password": "ENC(AAAA)"}).status_code == 302
    assert DataNode.objects.get(name="events").properties["sasl.password"] == "ENC(AAAA)"


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
    assert [f.key for f in nodefields.fields_of("kafka") if f.secret] == ["sasl.password"]
