"""The scheduler as a catalog listener: a flow saved with runImmediately, or
without a schedule (Gobblin's run-once flow: no schedule = run once, now),
runs now; a topology change gives executions waiting for a path another try;
pausing, re-scheduling or deleting a flow withdraws the ticks written ahead."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from portal.flows.models import FlowConfig
from portal.flows.signals import flow_catalog_changed, flow_deletion_asked, flow_pause_changed
from portal.orchestration.control import quota_gate
from portal.orchestration.control.commands import relaunch_waiting as relaunch
from portal.orchestration.control.scheduler import create_execution, sync_cursor
from portal.orchestration.control.upcoming import withdraw_upcoming
from portal.orchestration.models import DatasetState, FlowExecution, JobExecution
from portal.orchestration.signals import job_run_changed
from portal.orchestration.state import lineage
from portal.topology.signals import topology_catalog_changed


@receiver(flow_catalog_changed, dispatch_uid="orchestration.run_immediately")
def run_immediately(sender: Any, action: str, flow: FlowConfig, **kwargs: Any) -> None:
    # A paused flow is switched off: saving it starts nothing (Run now still does).
    runs_now = flow.run_immediately or not flow.schedule  # no schedule: run once, now (Gobblin)
    if action in ("add", "update") and runs_now and not flow.paused:
        # Past the owner's executions-per-hour quota the save is refused (a 503), as Gobblin does.
        quota_gate.check_hourly(flow.pk)
        create_execution(flow, FlowExecution.Trigger.RUN_IMMEDIATELY, requested_by=flow.owner.get_username())


@receiver(topology_catalog_changed, dispatch_uid="orchestration.relaunch_waiting")
def relaunch_waiting(sender: Any, **kwargs: Any) -> None:
    relaunch()


@receiver(flow_catalog_changed, dispatch_uid="orchestration.schedule_cursor")
def keep_schedule_cursor(sender: Any, action: str, flow: FlowConfig, **kwargs: Any) -> None:
    if action in ("add", "update"):
        sync_cursor(flow)
    elif action == "delete":  # before the row goes: its ticks written ahead go with it
        withdraw_upcoming(flow.pk)


@receiver(flow_pause_changed, dispatch_uid="orchestration.withdraw_on_pause")
def withdraw_on_pause(sender: Any, flow: FlowConfig, paused: bool, **kwargs: Any) -> None:
    # A paused flow's ticks written ahead go; on resume the next pass catches up.
    if paused:
        withdraw_upcoming(flow.pk)


@receiver(job_run_changed, dispatch_uid="orchestration.state.lineage")
def tell_lineage(
    sender: Any,
    job: JobExecution,
    status: str,
    attempt: int,
    task_states: list[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> None:
    lineage.job_changed(job, status, attempt, task_states)


@receiver(flow_deletion_asked, dispatch_uid="orchestration.what_goes_with_a_flow")
def what_goes_with_a_flow(sender: Any, flow: FlowConfig, **kwargs: Any) -> dict[str, list[str]]:
    """The flows that read what `flow` wrote (lineage) and its datasets with a watermark stored,
    for the delete confirmation (flows.deletion)."""
    watermarked = (
        DatasetState.objects.filter(flow_id=flow.pk)
        .exclude(watermark="")
        .values_list("dataset_urn", flat=True)
        .distinct()
    )
    return {"readers": lineage.readers_of(flow.flow_group, flow.flow_name), "watermarked": list(watermarked)}
