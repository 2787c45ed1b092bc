"""Executions and jobs as real rows, and a real two-hop flow for stories
that go through the orchestrator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import factory

from portal.flows.models import FlowConfig
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import executor, nodes

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)


class FlowExecutionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FlowExecution

    flow = factory.SubFactory(FlowConfigFactory)
    flow_group = factory.LazyAttribute(lambda e: e.flow.flow_group if e.flow else "sales")
    flow_name = factory.LazyAttribute(lambda e: e.flow.flow_name if e.flow else "gone")
    execution_id = factory.Sequence(lambda n: T0_MS + n * 60_000)
    trigger = FlowExecution.Trigger.RUN_NOW
    status = ExecutionStatus.RUNNING
    started_at = factory.LazyAttribute(lambda e: datetime.fromtimestamp(e.execution_id / 1000, tz=UTC))
    ended_at = factory.LazyAttribute(
        lambda e: (
            e.started_at + timedelta(minutes=5)
            if e.status in (ExecutionStatus.COMMITTED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)
            else None
        )
    )


class JobExecutionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobExecution

    execution = factory.SubFactory(FlowExecutionFactory)
    job_name = factory.Sequence(lambda n: f"job-{n}")
    job_group = factory.LazyAttribute(lambda j: j.execution.flow_group)
    hop_index = 1
    executor = "x1"
    queue = "executor.x1"
    status = JobStatus.RUNNING
    attempt = 1


def two_hop_flow(owner, **fields) -> FlowConfig:
    """A flow a → c compiled over two executors (a→b on x1, b→c on x2)."""
    nodes("a", "b", "c")
    executor("x1", "a>b")
    executor("x2", "b>c")
    defaults = {"flow_group": "demo", "flow_name": "a-to-c", "source": "a", "destinations": ["c"]}
    return FlowConfigFactory(owner=owner, **{"schedule": "", **defaults, **fields})
