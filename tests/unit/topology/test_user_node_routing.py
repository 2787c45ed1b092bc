"""A node a user makes is usable at once: the executors whose routing policy serves its kind
carry it, with no capability and no administrator. And it costs the portal nothing: making one
moves no topology revision and rebuilds no snapshot, a compile adds only the edges of the nodes
its flow names (one query), and changing one recompiles only the flows over it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.flows import refresh
from portal.flows import services as flow_services
from portal.flows.compiler import compile_flow
from portal.flows.forms import FlowConfigForm
from portal.flows.models import CompiledJobDag, FlowConfig, FlowRefresh
from portal.topology import services, sharing
from portal.topology.graph import current_snapshot, with_user_nodes
from portal.topology.models import DataNode
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

SALES_DB = "jdbc:postgresql://127.0.0.1:5432/alice_sales"


@pytest.fixture
def alice(db, data_dir, master_key):
    return UserFactory(username="alice")


@pytest.fixture
def ingest(db):
    """The administrators' topology: landing → lake on spark-local-ingest, which also serves
    user-made jdbc and files sources and files, jdbc and iceberg destinations."""
    nodes("landing", "lake")
    return executor(
        "spark-local-ingest",
        "landing>lake",
        cost=10,
        user_sources="jdbc, files",
        user_destinations="files,jdbc,iceberg",
    )


def own_folder(user, name: str) -> DataNode:
    path = f"users/{user.username}/{name}"
    return services.create_data_node({"name": name, "kind": "files", "properties": {"path": path}}, user=user)


def own_database(user, name: str) -> DataNode:
    return services.create_data_node(
        {"name": name, "kind": "jdbc", "properties": {"url": SALES_DB}}, user=user
    )


def unsaved_flow(owner, source: str, *destinations: str) -> FlowConfig:
    return FlowConfig(
        flow_group=owner.username,
        flow_name="copy",
        owner=owner,
        source=source,
        destinations=list(destinations),
        properties={"source.jdbc.tables": "orders", "extract.is.full": "true"},
    )


def save_flow(owner, name: str, source: str, *destinations: str) -> FlowConfig:
    return flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": owner.username,
            "flow_name": name,
            "source": source,
            "destinations": list(destinations),
            "properties": {"source.files.format": "csv"},
        },
    )


def test_the_executor_spec_and_the_topology_file_carry_the_routing_policy(ingest):
    assert (ingest.user_sources, ingest.user_destinations) == ("jdbc,files", "files,jdbc,iceberg")
    info = current_snapshot().executors["spark-local-ingest"]
    assert info.user_sources == {"jdbc", "files"} and info.user_destinations == {"files", "jdbc", "iceberg"}


def test_making_nodes_moves_no_revision_and_leaves_the_snapshot_as_it_was(alice, ingest):
    snapshot, revision = current_snapshot(), services.current_revision_number()
    for index in range(20):
        own_folder(alice, f"mine-{index}")
    assert services.current_revision_number() == revision
    assert current_snapshot() is snapshot  # the cached index, not rebuilt
    assert "mine-0" not in snapshot.nodes and snapshot.edge_count() == 1


def test_a_flow_between_a_users_own_nodes_compiles_at_once_on_the_executor_serving_their_kinds(alice, ingest):
    own_database(alice, "alice-db")
    own_folder(alice, "alice-out")
    compiled = compile_flow(unsaved_flow(alice, "alice-db", "alice-out"))
    assert compiled.status == "COMPILED", compiled.message
    (job,) = compiled.jobs
    assert (job.source_node, job.destination_node, job.executor) == (
        "alice-db",
        "alice-out",
        "spark-local-ingest",
    )
    assert job.properties["flowport.hop.source.url"] == SALES_DB
    assert job.properties["flowport.hop.destination.path"] == "users/alice/alice-out"


def test_a_saved_flow_over_a_users_folders_is_compiled_with_no_one_else_doing_anything(alice, ingest):
    own_folder(alice, "alice-in")
    own_folder(alice, "alice-out")
    flow = save_flow(alice, "first", "alice-in", "alice-out")
    flow.refresh_from_db()
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    assert "alice-in → alice-out on spark-local-ingest" in flow.compilation_message


def test_a_users_source_reaches_the_nodes_its_executor_writes_to_and_the_other_way_round(alice, ingest):
    own_database(alice, "alice-db")
    own_folder(alice, "alice-out")
    into_lake = compile_flow(unsaved_flow(alice, "alice-db", "lake"))
    assert into_lake.status == "COMPILED" and into_lake.jobs[0].executor == "spark-local-ingest"
    from_landing = compile_flow(unsaved_flow(alice, "landing", "alice-out"))
    assert from_landing.status == "COMPILED" and from_landing.jobs[0].executor == "spark-local-ingest"


def test_without_an_executor_serving_its_kind_the_flow_waits_naming_the_missing_hop(alice):
    nodes("landing", "lake")
    executor("plain", "landing>lake")  # no policy for user-made nodes
    own_database(alice, "alice-db")
    compiled = compile_flow(unsaved_flow(alice, "alice-db", "lake"))
    assert compiled.status == "PENDING"
    assert compiled.pending_reasons == [
        "alice-db → lake: missing hop out of alice-db (no enabled executor reads from it)"
    ]


def test_a_disabled_executor_serving_the_kind_is_named_in_the_reason(alice, ingest):
    services.set_enabled(ingest, False)
    own_database(alice, "alice-db")
    compiled = compile_flow(unsaved_flow(alice, "alice-db", "lake"))
    assert compiled.pending_reasons == [
        "alice-db → lake: missing hop alice-db → lake (spark-local-ingest is disabled)"
    ]


def test_a_compile_adds_one_query_and_only_the_edges_of_the_nodes_its_flow_names(alice, ingest):
    """Hundreds of other users' nodes change nothing: the compile reads the two it names."""
    others = [UserFactory(username=f"user{index}") for index in range(50)]
    DataNode.objects.bulk_create(  # each their most (USER_NODE_MAX_PER_USER): 1,000 in all
        DataNode(name=f"n{i}-{n}", kind="files", user_made=True, created_by=user, properties={"path": "x"})
        for i, user in enumerate(others)
        for n in range(20)
    )
    own_database(alice, "alice-db")
    own_folder(alice, "alice-out")
    snapshot = current_snapshot()
    with CaptureQueriesContext(connection) as queries:
        widened = with_user_nodes(snapshot, "alice-db", ["alice-out", "lake"])
    assert len(queries) == 1
    assert (
        widened.edge_count() - snapshot.edge_count() == 3
    )  # alice-db → lake, alice-out; landing → alice-out
    assert set(widened.nodes) - set(snapshot.nodes) == {"alice-db", "alice-out"}
    assert snapshot.edge_count() == 1 and "alice-db" not in snapshot.nodes  # the cached one untouched
    with CaptureQueriesContext(connection) as queries:
        assert with_user_nodes(snapshot, "landing", ["lake"]) is snapshot  # naming none: no query
    assert len(queries) == 0


def test_changing_a_users_node_recompiles_only_the_flows_over_it(alice, ingest, owner):
    own_folder(alice, "alice-in")
    out = own_folder(alice, "alice-out")
    save_flow(alice, "mine", "alice-in", "alice-out")
    save_flow(owner, "theirs", "landing", "lake")
    refresh.drain()
    revision = services.current_revision_number()
    services.update_data_node(out, {"properties": {"path": "users/alice/elsewhere"}}, user=alice)
    assert services.current_revision_number() == revision
    assert set(FlowRefresh.objects.values_list("flow__flow_name", flat=True)) == {"mine"}
    refresh.drain()
    dag = CompiledJobDag.objects.get(flow__flow_name="mine").dag
    assert dag["jobs"][0]["properties"]["flowport.hop.destination.path"] == "users/alice/elsewhere"
    assert not FlowRefresh.objects.exists()


def test_a_grant_or_a_revoke_recompiles_the_flows_over_the_node_only(alice, ingest, owner):
    node = own_folder(alice, "alice-in")
    own_folder(alice, "alice-out")
    save_flow(alice, "mine", "alice-in", "alice-out")
    save_flow(owner, "theirs", "landing", "lake")
    refresh.drain()
    sharing.grant(node, user=alice, role="read", principal={"user": owner.username})
    assert set(FlowRefresh.objects.values_list("flow__flow_name", flat=True)) == {"mine"}


def test_the_flow_form_offers_sources_the_owner_may_read_and_destinations_they_may_write(
    alice, ingest, settings
):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    bob = UserFactory(username="bob")
    source, target = own_folder(alice, "alice-in"), own_folder(alice, "alice-out")

    def offered(user) -> tuple[set[str], set[str]]:
        form = FlowConfigForm(user=user)
        groups = form.fields["source"].widget.choices[1:]
        return {name for _kind, items in groups for name, _label in items}, {n.name for n in form.nodes}

    assert offered(alice) == ({"alice-in", "alice-out"}, {"alice-in", "alice-out"})
    assert offered(bob) == (set(), set())
    sharing.grant(source, user=alice, role="read", principal={"user": "bob"})
    sharing.grant(target, user=alice, role="write", principal={"user": "bob"})
    assert offered(bob) == ({"alice-in"}, {"alice-out"})


def test_a_flow_waiting_for_a_policy_compiles_once_an_administrator_serves_its_kind(alice, owner):
    """The planner diffs only the administrators' topology: a change of an executor's serving
    queues the flows over user-made nodes of the kinds it serves, and only those."""
    nodes("landing", "lake")
    plain = executor("plain", "landing>lake")
    own_folder(alice, "alice-in")
    own_folder(alice, "alice-out")
    waiting = save_flow(alice, "waiting", "alice-in", "alice-out")
    save_flow(owner, "theirs", "landing", "lake")
    refresh.drain()
    waiting.refresh_from_db()
    assert waiting.compilation_status == "PENDING"
    services.update_executor(plain, {"user_sources": "files", "user_destinations": "files"})
    assert set(FlowRefresh.objects.values_list("flow__flow_name", flat=True)) == {"waiting"}
    refresh.drain()
    waiting.refresh_from_db()
    assert waiting.compilation_status == "COMPILED", waiting.compilation_message
    services.set_enabled(plain, False)  # serving stopped: the flow over it waits again
    refresh.drain()
    waiting.refresh_from_db()
    assert waiting.compilation_status == "PENDING"
    assert "plain is disabled" in waiting.compilation_message
