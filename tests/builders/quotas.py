"""One-hop flows run and finished in-process: what the quota stories share."""

from __future__ import annotations

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.scheduler import create_execution
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.orchestration.worker import executor as worker
from tests.factories import FlowConfigFactory


def one_hop_flow(owner, name: str, **fields):
    defaults = {"flow_group": "demo", "source": "a", "destinations": ["b"], "properties": dict(CONCURRENT)}
    return FlowConfigFactory(owner=owner, flow_name=name, schedule="", **{**defaults, **fields})


def the_job(execution: FlowExecution) -> JobExecution:
    return JobExecution.objects.get(execution=execution)


def run(flow, user, trigger=FlowExecution.Trigger.RUN_NOW) -> FlowExecution:
    if trigger == FlowExecution.Trigger.RUN_NOW:
        execution = services.run_now(flow, user=user)
    else:
        execution = create_execution(flow, trigger, requested_by=user.username)
    process_actions()
    return execution


def finish(job: JobExecution) -> None:
    """A worker claims the dispatched job and commits it."""
    job.refresh_from_db()
    claimed = worker.claim(job.pk, job.attempt, "test-worker")
    assert claimed is not None
    worker.report(claimed, job.attempt, JobStatus.COMMITTED)
    while process_actions():  # the finish, then the waiters it wakes
        pass


CONCURRENT = {"flow.allowConcurrentExecution": "true"}
