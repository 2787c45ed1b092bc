"""A topology change commits at once; the flows it can affect — and only
those — are recompiled in the background, guarded by the revision."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.bulk import update_rows
from portal.flows import refresh
from portal.flows import services as flow_services
from portal.flows.compiler.record import record_batch
from portal.flows.models import CompiledHop, CompiledJobDag, FlowConfig, FlowRefresh
from portal.topology import services
from portal.topology.graph import current_snapshot
from portal.topology.models import SpecExecutor
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def flow(owner, name: str, source: str, *destinations: str) -> FlowConfig:
    return flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "g",
            "flow_name": name,
            "source": source,
            "destinations": list(destinations),
            "properties": {"source.files.format": "csv"},  # the files source needs it
        },
    )


def queued() -> set[str]:
    """Names of the flows the planner queued for a background recompile."""
    refresh.plan_refresh()
    return set(FlowRefresh.objects.values_list("flow__flow_name", flat=True))


def status(name: str) -> str:
    return FlowConfig.objects.get(flow_group="g", flow_name=name).compilation_status


@pytest.fixture
def catalog(owner):
    """a → b (e1) → c (e2), x → y (e3); flows over each, and one pending to d."""
    nodes("a", "b", "c", "d", "x", "y")
    executor("e1", "a>b")
    executor("e2", "b>c")
    executor("e3", "x>y")
    flows = {
        "to-b": flow(owner, "to-b", "a", "b"),
        "to-c": flow(owner, "to-c", "a", "c"),
        "x-to-y": flow(owner, "x-to-y", "x", "y"),
        "to-d": flow(owner, "to-d", "a", "d"),
    }
    refresh.drain()  # the planner's baseline
    assert not FlowRefresh.objects.exists()
    return flows


def test_disabling_an_executor_recompiles_exactly_the_flows_routed_over_it_and_the_pending_ones_it_reaches(
    catalog,
):
    services.set_enabled(SpecExecutor.objects.get(name="e2"), False)

    # to-c runs on e2; to-d is pending and its reason lists what a reaches.
    assert queued() == {"to-c", "to-d"}
    refresh.drain()
    assert status("to-c") == "PENDING"
    assert "e2 is disabled" in FlowConfig.objects.get(flow_name="to-c").compilation_message
    assert status("to-b") == status("x-to-y") == "COMPILED"
    assert not FlowRefresh.objects.exists()


def test_a_pending_flow_becomes_compiled_by_the_background_recompile_with_no_user_action(catalog):
    assert status("to-d") == "PENDING"

    executor("e4", "c>d")

    assert queued() == {"to-d"}  # to-b and to-c cannot use c → d
    assert status("to-d") == "PENDING"  # the change itself compiled nothing
    refresh.drain()
    to_d = FlowConfig.objects.get(flow_name="to-d")
    assert to_d.compilation_status == "COMPILED"
    assert to_d.compilation_message == "3 jobs: a → b on e1; b → c on e2; c → d on e4"
    assert set(CompiledHop.objects.filter(flow=to_d).values_list("source", "destination", "executor")) == {
        ("a", "b", "e1"),
        ("b", "c", "e2"),
        ("c", "d", "e4"),
    }


def test_re_enabling_an_executor_brings_back_the_flows_that_could_use_it(catalog):
    e2 = SpecExecutor.objects.get(name="e2")
    services.set_enabled(e2, False)
    executor("e4", "c>d")
    refresh.drain()
    assert status("to-c") == status("to-d") == "PENDING"

    services.set_enabled(e2, True)

    assert queued() == {"to-c", "to-d"}
    refresh.drain()
    assert status("to-c") == status("to-d") == "COMPILED"


def test_a_health_flip_that_changes_no_route_changes_no_flow(catalog):
    before = dict(CompiledJobDag.objects.values_list("flow__flow_name", "compiled_at"))

    services.record_health("e3", "HEALTHY", "heartbeat")  # UNKNOWN → HEALTHY: e3 is still the only way

    assert queued() == set()
    assert dict(CompiledJobDag.objects.values_list("flow__flow_name", "compiled_at")) == before


def test_a_busy_executor_routes_as_healthy_so_its_flips_change_no_flow(catalog):
    services.record_health("e3", "HEALTHY", "heartbeat")
    revision = services.current_revision()
    before = dict(CompiledJobDag.objects.values_list("flow__flow_name", "compiled_at"))

    services.record_health("e3", "BUSY", "all job threads run jobs")
    services.record_health("e3", "HEALTHY", "a thread is free")
    services.record_health("e3", "BUSY", "all job threads run jobs")

    assert services.current_revision() == revision
    assert queued() == set()
    assert dict(CompiledJobDag.objects.values_list("flow__flow_name", "compiled_at")) == before


def test_a_cheaper_executor_moves_the_flows_that_can_use_it(catalog):
    executor("e1-cheap", "a>b", cost=1)

    assert queued() == {"to-b", "to-c", "to-d"}  # every flow out of a
    refresh.drain()
    assert "a → b on e1-cheap" in FlowConfig.objects.get(flow_name="to-c").compilation_message


def test_a_data_node_change_recompiles_the_flows_through_it(catalog):
    services.update_data_node(services.DataNode.objects.get(name="y"), {"properties": {"path": "/data/y2"}})

    assert queued() == {"x-to-y"}
    refresh.drain()
    dag = CompiledJobDag.objects.get(flow__flow_name="x-to-y").dag
    assert dag["jobs"][0]["properties"]["flowport.hop.destination.path"] == "/data/y2"


def test_a_stale_recompile_loses_to_a_newer_revision(catalog):
    to_c = catalog["to-c"]
    older = current_snapshot()
    services.set_enabled(SpecExecutor.objects.get(name="e2"), False)
    refresh.drain()
    assert status("to-c") == "PENDING"

    # A slow recompiler that read the topology before the change finishes now.
    counts = record_batch([FlowConfig.objects.get(pk=to_c.pk)], older)

    assert counts["stale"] == 1
    assert status("to-c") == "PENDING"
    stored = CompiledJobDag.objects.get(flow=to_c)
    assert stored.revision > older.number


def test_a_topology_change_does_no_work_per_flow(owner):
    nodes("a", "b")
    e1 = executor("e1", "a>b")

    def queries_to_disable_and_enable() -> int:
        with CaptureQueriesContext(connection) as captured:
            services.set_enabled(e1, False)
            services.set_enabled(e1, True)
        return len(captured)

    flow(owner, "one", "a", "b")
    with_one = queries_to_disable_and_enable()
    for n in range(20):
        flow(owner, f"more-{n}", "a", "b")
    assert queries_to_disable_and_enable() == with_one
    assert status("one") == "COMPILED"  # untouched until the background recompile


def test_the_flow_page_and_api_say_while_a_verdict_is_being_refreshed(catalog, owner, client):
    client.force_login(owner)
    services.set_enabled(SpecExecutor.objects.get(name="e2"), False)

    page = client.get("/flows/g/to-c/")
    assert "being refreshed" in page.content.decode()
    refresh.plan_refresh()
    assert client.get("/api/flowconfigs/g/to-c").json()["compilation"]["refreshing"] is True
    assert "refreshing" in client.get("/flows/").content.decode()

    refresh.drain()
    part = client.get("/flows/g/to-c/?part=compilation").content.decode()
    assert "being refreshed" not in part and "pending" in part.lower()
    assert client.get("/api/flowconfigs/g/to-c").json()["compilation"]["refreshing"] is False


@pytest.mark.postgres  # PostgreSQL's column compression
def test_compiled_dags_are_stored_with_the_cheaper_compression():
    """A topology change rewrites thousands of DAGs; lz4 halves the database's share of that."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute WHERE attrelid = 'topology_compiledjobdag'::regclass "
            "AND attname = 'dag'"
        )
        assert cursor.fetchone()[0] == "l"


@pytest.mark.postgres  # PostgreSQL's heap-only updates
def test_rewriting_a_pages_worth_of_verdicts_touches_none_of_the_flow_tables_indexes(owner):
    """A recompile batch rewrites the verdicts of hundreds of flows in one
    transaction (the message names the executors); with room on each page
    (migration flows 0015) they are heap-only updates: no new entry in
    the flow table's nine indexes, four of them trigram GIN."""
    flows = FlowConfig.objects.bulk_create(
        FlowConfig(
            flow_group="bulk",
            flow_name=f"f{n:03d}",
            owner=owner,
            source="a",
            compilation_message="2 jobs: a → b on e1; b → c on e2",
        )
        for n in range(300)
    )
    for one in flows:
        one.compilation_message = "2 jobs: a → b on e7; b → c on e2"  # the route moved to e7

    def counters() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_stat_get_xact_tuples_updated('flows_flowconfig'::regclass), "
                "pg_stat_get_xact_tuples_hot_updated('flows_flowconfig'::regclass)"
            )
            return cursor.fetchone()

    updated, heap_only = counters()
    update_rows(flows, ["compilation_message"])
    after_updated, after_heap_only = counters()

    assert after_updated - updated == 300
    assert after_heap_only - heap_only == 300
    assert set(
        FlowConfig.objects.filter(flow_group="bulk").values_list("compilation_message", flat=True)
    ) == {"2 jobs: a → b on e7; b → c on e2"}
