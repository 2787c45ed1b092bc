"""A compiled job's properties as anyone who may see the flow sees them: a hop node's connection
masked as the node's own page masks it for one who is not its owner, its root folder on the
portal's server shown to staff only."""

from __future__ import annotations

from django.test import Client

from portal.flows import services as flow_services
from portal.flows.shown import shown_properties, shown_property
from portal.topology import grants, services
from portal.topology.models import DataNode
from portal.topology.nodefields import SERVER_ROOT
from tests.builders.api import api_client_for
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor


def test_a_login_kept_in_a_hop_url_is_masked():
    shown = shown_property("flowport.hop.source.url", "jdbc:postgresql://db:5432/shop?user=reader")
    assert "reader" not in str(shown) and "db:5432/shop" in str(shown)


def test_a_hop_nodes_account_and_encrypted_values_are_masked():
    assert shown_property("flowport.hop.destination.user", "writer") == "********"
    assert "ENC(" not in str(shown_property("flowport.hop.destination.password", "ENC(djE6eA==)")).replace(
        "ENC(…)", ""
    )
    assert shown_property("source.jdbc.tables", "public.orders") == "public.orders"


HOP_KEYS = {
    "flowport.hop.source.kind": "files",
    "flowport.hop.source.path": "/srv/flowport/landing",
    "flowport.hop.destination.kind": "iceberg",
    "flowport.hop.destination.warehouse": "file:/srv/flowport/warehouse",
    "flowport.hop.destination.catalog": "lake",
}


def test_a_hop_nodes_server_root_is_staffs_to_see(db):
    """The compile preview and the API's jobs name the nodes' roots as the nodes' pages do:
    a folder on the portal's server is shown to staff only."""
    ordinary = UserFactory(username="olga")
    shown = shown_properties(HOP_KEYS, ordinary)
    assert shown["flowport.hop.source.path"] == SERVER_ROOT
    assert shown["flowport.hop.destination.warehouse"] == SERVER_ROOT
    assert shown["flowport.hop.destination.catalog"] == "lake"
    assert shown_properties(HOP_KEYS, UserFactory(username="stella", is_staff=True)) == HOP_KEYS
    in_a_bucket = {"flowport.hop.source.kind": "files", "flowport.hop.source.path": "s3a://bucket/landing"}
    assert shown_properties(in_a_bucket, ordinary) == in_a_bucket  # an address, not the server's layout


def test_the_compile_preview_and_the_jobs_api_hide_the_server_folders(db, tmp_path):
    owner = UserFactory(username="olga")
    for name in ("landing", "lake"):
        services.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
        grants.set_grants(DataNode.objects.get(name=name), [{"role": "owner", "user": owner.username}])
    executor("x1", "landing>lake")
    flow = {
        "flow_group": "sales",
        "flow_name": "orders",
        "source": "landing",
        "destinations": "lake",
        "properties_text": "source.class=tests.integration.sources.CountingSource\nnumbers.per.run=5\n"
        "writer.output.format=json",
    }
    staff = UserFactory(username="stella", is_staff=True)
    for user, sees in ((owner, False), (staff, True)):
        browser = Client()
        browser.force_login(user)
        html = browser.post("/flows/new/?part=compile", flow).content.decode()
        assert "flowport.hop.source.path=" in html
        assert (str(tmp_path) in html) is sees and ("its path is shown to staff" in html) is not sees
    flow_services.create_flow(
        owner=owner,
        data={
            **flow,
            "destinations": ["lake"],
            "properties": dict(line.split("=", 1) for line in flow["properties_text"].splitlines()),
        },
    )
    jobs = api_client_for(owner).get("/api/flowconfigs/sales/orders/jobs").json()["jobs"]
    assert jobs and str(tmp_path) not in str(jobs)
    assert jobs[0]["properties"]["flowport.hop.destination.path"] == SERVER_ROOT
