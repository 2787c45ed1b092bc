"""An Iceberg data node: a SQL catalog URL and a warehouse folder. The catalog's password never sits
in the node (it is a flow's ENC(...) key); neither the catalog nor the warehouse may reach the
portal's own database or files; the hop binding hands the pipeline absolute locations."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.orchestration.control.jobspecs import bind_hop
from tests.builders.api import api_client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _post(properties: dict[str, str]):
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    return staff.post(
        "/api/datanodes", {"name": "lakehouse", "kind": "iceberg", "properties": properties}, format="json"
    )


def test_an_iceberg_node_names_its_catalog_and_warehouse(tmp_path):
    response = _post({"catalog.uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": str(tmp_path / "wh")})
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        (
            "postgresql+psycopg://lake:hunter2@db.example.org/catalog",
            "writer.iceberg.catalog.password=ENC(...)",
        ),
        ("mysql+pymysql://lake@db.example.org/catalog", "not a sqlite:///"),
        ("", "required"),
    ],
)
def test_a_catalog_url_with_a_password_or_an_unknown_database_is_refused(tmp_path, uri, words):
    response = _post({"catalog.uri": uri, "warehouse": str(tmp_path / "wh")})
    assert response.status_code == 400, response.content
    assert "catalog.uri" in str(response.json()) and words in str(response.json())


def test_the_portal_database_cannot_be_an_iceberg_catalog(tmp_path):
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        uri = f"postgresql+psycopg://postgres@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"
    else:  # the embedded portal's file
        uri = f"sqlite:///{db['NAME']}"
    response = _post({"catalog.uri": uri, "warehouse": str(tmp_path / "wh")})
    assert response.status_code == 400, response.content
    said = str(response.json())
    assert "portal's own database" in said or "contains the portal's database" in said


def test_the_warehouse_cannot_hold_the_portals_files(tmp_path, settings):
    response = _post(
        {"catalog.uri": f"sqlite:///{tmp_path}/c.db", "warehouse": str(settings.FLOWPORT_WORK_DIR)}
    )
    assert response.status_code == 400, response.content
    assert "warehouse" in str(response.json())


def test_the_binding_gives_the_pipeline_absolute_locations(settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path
    plan = {
        "properties": {
            "flow.group": "weather",
            "flow.name": "readings",
            "flowport.hop.destination.kind": "iceberg",
            "flowport.hop.destination.catalog.uri": "sqlite:///lake/catalog.db",
            "flowport.hop.destination.warehouse": "lake/warehouse",
            "writer.iceberg.warehouse": "/elsewhere",  # a flow cannot steer it
        }
    }
    props = bind_hop(plan, [], final=True)
    assert props["writer.output.format"] == "ICEBERG"
    assert props["writer.iceberg.catalog.uri"] == f"sqlite:///{tmp_path}/lake/catalog.db"
    assert props["writer.iceberg.warehouse"] == f"{tmp_path}/lake/warehouse"


def test_test_connection_and_discovery_list_the_catalogs_tables_and_columns(tmp_path):
    import pyarrow as pa

    from portal.pipeline.destinations.iceberg import load_catalog
    from portal.topology import connections
    from portal.topology.models import DataNode

    uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "wh")
    catalog = load_catalog(uri, None, warehouse)
    catalog.create_namespace("weather")
    schema = pa.schema([("id", pa.int64()), ("taken_at", pa.timestamp("us", tz="UTC"))])
    catalog.create_table(("weather", "readings"), schema=schema)
    node = DataNode.objects.create(
        name="lakehouse", kind="iceberg", properties={"catalog.uri": uri, "warehouse": warehouse}
    )
    tested = connections.test_connection(node)
    assert (tested.ok, tested.schemas) == (True, ["weather"]), tested.message
    found = connections.discover(node)
    assert found.ok, found.message
    assert [(d.name, [(c.name, c.type) for c in d.columns]) for d in found.datasets] == [
        ("weather.readings", [("id", "long"), ("taken_at", "timestamptz")])
    ]
    dead = DataNode.objects.create(
        name="dead",
        kind="iceberg",
        properties={"catalog.uri": "postgresql+psycopg://lake@127.0.0.1:1/catalog", "warehouse": warehouse},
    )
    failed = connections.test_connection(dead)
    assert not failed.ok and "OperationalError" in failed.message


def test_a_flow_to_an_iceberg_node_is_refused_at_save_naming_what_it_lacks(tmp_path):
    from portal.topology import services as topology

    topology.create_data_node({"name": "landing", "kind": "files", "properties": {"path": str(tmp_path)}})
    topology.create_data_node(
        {
            "name": "lakehouse",
            "kind": "iceberg",
            "properties": {"catalog.uri": f"sqlite:///{tmp_path}/c.db", "warehouse": str(tmp_path / "wh")},
        }
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": "q"},
        capabilities=[("landing", "lakehouse")],
    )
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    body = {
        "flowGroup": "weather",
        "flowName": "readings",
        "source": "landing",
        "destinations": ["lakehouse"],
        "properties": {
            "source.files.format": "csv",
            "writer.iceberg.write.mode": "merge",
            "writer.iceberg.table": "../../etc",
        },
    }
    response = staff.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400, response.content
    text = str(response.json())
    assert "merge needs extract.primary.key.fields" in text and "must be a plain name" in text
    body["properties"].update({"extract.primary.key.fields": "id", "writer.iceberg.table": "readings"})
    assert staff.post("/api/flowconfigs", body, format="json").status_code == 201
    body["properties"]["writer.iceberg.catalog.uri"] = "sqlite:////tmp/elsewhere.db"
    body["flowName"] = "steered"
    response = staff.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400 and "writer.iceberg.catalog.uri" in str(response.json())
