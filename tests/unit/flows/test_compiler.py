"""FlowCompiler: path search, DAG shape, properties, pending and recompiles."""

from __future__ import annotations

import pytest

from portal.flows import refresh
from portal.flows import services as flow_services
from portal.flows.compiler import compile_flow
from portal.flows.models import CompiledJobDag, FlowConfig
from portal.topology import services
from portal.topology.graph import TopologySnapshot
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def flow_to(source: str, *destinations: str, **fields) -> FlowConfig:
    return FlowConfigFactory.build(
        flow_group="g", flow_name="f", source=source, destinations=list(destinations), **fields
    )


def hops(compiled) -> list[tuple[str, str, str]]:
    return [(job.source_node, job.destination_node, job.executor) for job in compiled.jobs]


def test_single_hop_binds_the_job_to_the_executor_with_its_queue_and_master():
    nodes("a", "b")
    executor("x1", "a>b", spark_conf={"spark.sql.shuffle.partitions": "4"})
    compiled = compile_flow(flow_to("a", "b", properties={"source.jdbc.tables": "orders"}))
    assert compiled.status == "COMPILED"
    [job] = compiled.jobs
    assert job.job_name == "g.f.1-a-to-b"
    assert (job.executor, job.queue, job.spark_master) == ("x1", "executor.x1", "local[2]")
    assert job.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert job.parents == []
    assert job.properties["source.jdbc.tables"] == "orders"
    assert job.properties["flowport.hop.source.path"] == "var/data/a"
    assert job.properties["flowport.hop.destination.kind"] == "files"
    assert job.properties["job.name"] == "g.f.1-a-to-b"
    assert compiled.message == "1 job: a → b on x1"


def test_two_hops_on_two_executors_chain_parent_to_child():
    nodes("a", "b", "c")
    executor("x1", "a>b")
    executor("x2", "b>c")
    compiled = compile_flow(flow_to("a", "c"))
    assert hops(compiled) == [("a", "b", "x1"), ("b", "c", "x2")]
    assert compiled.jobs[1].parents == ["g.f.1-a-to-b"]
    assert compiled.jobs[1].job_name == "g.f.2-b-to-c"


def test_three_hops_prefer_fewer_hops_over_lower_cost():
    nodes("a", "b", "c", "d")
    executor("cheap", "a>b", "b>c", "c>d", cost=1)
    compiled = compile_flow(flow_to("a", "d"))
    assert hops(compiled) == [("a", "b", "cheap"), ("b", "c", "cheap"), ("c", "d", "cheap")]
    executor("direct-ish", "b>d", cost=500)
    compiled = compile_flow(flow_to("a", "d"))
    assert hops(compiled) == [("a", "b", "cheap"), ("b", "d", "direct-ish")]


def test_equal_hops_prefer_lower_cost_then_health_then_name():
    nodes("a", "b")
    executor("zeta", "a>b", cost=10)
    executor("alpha", "a>b", cost=20)
    assert hops(compile_flow(flow_to("a", "b"))) == [("a", "b", "zeta")]
    executor("beta", "a>b", cost=10)
    assert hops(compile_flow(flow_to("a", "b"))) == [("a", "b", "beta")]
    services.record_health("zeta", "HEALTHY")
    assert hops(compile_flow(flow_to("a", "b"))) == [("a", "b", "zeta")]


def test_several_destinations_share_the_prefix_once():
    nodes("src", "mid", "d1", "d2")
    executor("x1", "src>mid")
    executor("x2", "mid>d1", "mid>d2")
    compiled = compile_flow(flow_to("src", "d1", "d2"))
    assert [job.job_name for job in compiled.jobs] == [
        "g.f.1-src-to-mid",
        "g.f.2-mid-to-d1",
        "g.f.2-mid-to-d2",
    ]
    assert compiled.jobs[0].serves_destinations == ["d1", "d2"]
    assert compiled.jobs[1].parents == compiled.jobs[2].parents == ["g.f.1-src-to-mid"]


def test_disabled_and_unhealthy_executors_are_avoided():
    nodes("a", "b", "c")
    fast = executor("fast", "a>c", cost=1)
    executor("slow1", "a>b")
    executor("slow2", "b>c")
    services.set_enabled(fast, False)
    assert hops(compile_flow(flow_to("a", "c"))) == [("a", "b", "slow1"), ("b", "c", "slow2")]
    services.record_health("slow2", "UNHEALTHY", "worker lost")
    compiled = compile_flow(flow_to("a", "c"))
    assert compiled.status == "PENDING"
    assert compiled.pending_reasons == ["a → c: missing hop a → c (fast is disabled)"]


def test_no_path_names_the_missing_hop_per_destination():
    nodes("a", "b", "c", "d")
    executor("x1", "a>b")
    compiled = compile_flow(flow_to("a", "c", "b", "nowhere"))
    assert compiled.status == "PENDING"
    assert compiled.pending_reasons == [
        "a → c: missing hop into c (no enabled executor writes to it; reachable: b, a)",
        "a → nowhere: destination 'nowhere' is not a data node in the topology",
    ]
    assert hops(compiled) == [("a", "b", "x1")]
    executor("x9", "d>c")
    assert compile_flow(flow_to("a", "c")).pending_reasons == [
        "a → c: missing hop from one of [b, a] to one of [d]"
    ]
    assert compile_flow(flow_to("c", "a")).pending_reasons == [
        "c → a: missing hop out of c (no enabled executor reads from it)"
    ]


def test_pending_flow_compiles_automatically_when_an_executor_is_added(owner):
    nodes("landing", "lake", "archive")
    executor("ingest", "landing>lake")
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "demo",
            "flow_name": "f",
            "source": "landing",
            "destinations": ["archive"],
            "properties": {"source.files.format": "csv"},
        },
    )
    assert flow.compilation_status == "PENDING"
    assert "missing hop into archive" in flow.compilation_message
    assert "status" not in CompiledJobDag.objects.get(flow=flow).dag  # the verdict is the flow's alone

    executor("replicate", "lake>archive")
    refresh.drain()  # the scheduler's background recompile

    flow.refresh_from_db()
    assert flow.compilation_status == "COMPILED"
    assert flow.compilation_message == "2 jobs: landing → lake on ingest; lake → archive on replicate"
    dag = CompiledJobDag.objects.get(flow=flow).dag
    assert [job["jobName"] for job in dag["jobs"]] == ["demo.f.1-landing-to-lake", "demo.f.2-lake-to-archive"]


def test_deleting_an_executor_makes_a_compiled_flow_pending(owner):
    nodes("a", "b")
    only = executor("only", "a>b")
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "g",
            "flow_name": "f",
            "source": "a",
            "destinations": ["b"],
            "properties": {"source.files.format": "csv"},
        },
    )
    assert flow.compilation_status == "COMPILED"
    services.delete_executor(only)
    refresh.drain()
    flow.refresh_from_db()
    assert flow.compilation_status == "PENDING"


def test_flow_without_source_or_destinations_fails_with_a_reason():
    compiled = compile_flow(
        flow_to(
            "",
        )
    )
    assert compiled.status == "FAILED"
    assert compiled.errors == [
        "The flow has no source; set its source data node.",
        "The flow has no destinations; set at least one destination data node.",
    ]


def test_compile_is_deterministic_and_uses_a_given_snapshot():
    nodes("a", "b", "c")
    executor("x2", "a>b", "b>c")
    executor("x1", "a>b", "b>c")
    snapshot = TopologySnapshot.from_db()
    runs = {tuple(hops(compile_flow(flow_to("a", "c"), topology=snapshot))) for _ in range(5)}
    assert runs == {(("a", "b", "x1"), ("b", "c", "x1"))}
