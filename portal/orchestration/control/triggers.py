"""Data triggers at work: a flow's run started by upstream commits, arriving files or its webhook
(the settings are the catalog's: flows.triggers), and the freshness goals' clock moved by commits.

An upstream commit is seen where it is decided: the orchestrator calls `execution_committed` in
the transaction that marks the upstream execution COMMITTED, so the downstream execution (and its
LAUNCH action) commits with it and the same loop pass launches it — no poll of the catalog, and
the lookups are the index on `UpstreamDataset.upstream` and the flow's freshness goal. A debounce
sets `FlowTrigger.fire_at`; `fire_due` (every loop pass) reads only due rows, as `check_files`
reads only the file watches due for a look.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.flows.models import FlowConfig
from portal.flows.triggers.models import FlowTrigger, FreshnessGoal, UpstreamDataset
from portal.flows.triggers.services import read_refusal
from portal.orchestration.control import quota_gate
from portal.orchestration.control.scheduler import create_execution
from portal.orchestration.models import DatasetStateHistory, FlowExecution
from portal.pipeline import confinement
from portal.quotas.services import QuotaExceeded
from portal.topology.models import DataNode

logger = logging.getLogger(__name__)

BATCH = 100


class WebhookRefused(Exception):
    """The webhook call is refused: unknown flow, wrong or revoked token (all alike to the caller)."""


class WebhookNotRun(Exception):
    """The token is right but the flow cannot run now (paused, over its quota); the reason is its text."""


def _start(flow: FlowConfig, trigger: str, why: str) -> FlowExecution | None:
    """One triggered execution, or None (logged) when the flow may not run now."""
    if flow.paused:
        logger.info("%s is paused: %s starts nothing", flow, why)
        return None
    try:
        quota_gate.check_hourly(flow.pk)
    except QuotaExceeded as exc:
        logger.warning("%s not started by %s: %s", flow, why, exc)
        return None
    execution = create_execution(flow, trigger, requested_by=why[:150])
    logger.info("%s started by %s: execution %s", flow, why, execution.execution_id if execution else "-")
    return execution


def _fire(trigger: FlowTrigger, why: str) -> FlowExecution | None:
    """Start the downstream flow and consume the upstream commits it answers."""
    flow = trigger.flow
    for row in UpstreamDataset.objects.filter(trigger=trigger).select_related("upstream"):
        # A read grant revoked since the trigger was saved: the data is no longer theirs to follow.
        if refusal := read_refusal(flow.owner, row.upstream):
            logger.warning("%s not started by %s: %s", flow, why, refusal)
            UpstreamDataset.objects.filter(trigger=trigger).update(committed_execution=None)
            FlowTrigger.objects.filter(pk=trigger.pk).update(fire_at=None)
            return None
    UpstreamDataset.objects.filter(trigger=trigger).update(committed_execution=None)
    FlowTrigger.objects.filter(pk=trigger.pk).update(fire_at=None)
    return _start(flow, FlowExecution.Trigger.DATA, why)


def _committed_datasets(flow_id: int, execution_id: int) -> set[str]:
    return set(
        DatasetStateHistory.objects.filter(state__flow_id=flow_id, execution_id=execution_id).values_list(
            "state__dataset_urn", flat=True
        )
    )


def _delivered_nothing(execution: FlowExecution) -> bool:
    """Whether the commit delivered no record at all (for triggers that skip empty commits)."""
    return not execution.jobs.filter(processed_count__gt=0).exists()


def execution_committed(execution: FlowExecution) -> list[FlowExecution]:  # noqa: C901
    """The upstream side of a commit (inside the transaction that records it): move the flow's
    freshness goal, mark the upstream rows naming it, and start the downstream flows whose
    condition now holds (or set their debounce). Returns the executions started."""
    flow_id = execution.flow_id
    if flow_id is None:
        return []
    now = timezone.now()
    committed: set[str] | None = None  # read once, only when a named dataset asks
    goals = list(FreshnessGoal.objects.select_for_update().filter(flow_id=flow_id))
    rows = list(
        UpstreamDataset.objects.filter(upstream_id=flow_id).values_list(
            "pk", "trigger_id", "dataset", "trigger__skip_empty"
        )
    )
    if any(goal.dataset for goal in goals) or any(dataset for _, _, dataset, _ in rows):
        committed = _committed_datasets(flow_id, execution.execution_id)
    for goal in goals:
        if goal.dataset and goal.dataset not in (committed or set()):
            continue
        goal.last_commit_at, goal.stale_since = now, None
        goal.due_at = goal.next_due(now)
        goal.save(update_fields=["last_commit_at", "stale_since", "due_at"])
    if not rows:
        return []
    committed = committed or set()
    empty = any(skip for *_, skip in rows) and _delivered_nothing(execution)
    marked = [
        pk for pk, _, dataset, skip in rows if (not dataset or dataset in committed) and not (skip and empty)
    ]
    if not marked:
        return []
    UpstreamDataset.objects.filter(pk__in=marked).update(committed_execution=execution.execution_id)
    started = []
    why = f"data: {execution.flow_group}/{execution.flow_name}#{execution.execution_id} committed"
    triggers = (
        FlowTrigger.objects.select_for_update()
        .filter(pk__in={trigger_id for pk, trigger_id, *_ in rows if pk in marked})
        .select_related("flow", "flow__owner")
        .order_by("pk")
    )
    for trigger in triggers:
        if (
            trigger.upstream_mode == FlowTrigger.Mode.ALL
            and UpstreamDataset.objects.filter(trigger=trigger, committed_execution__isnull=True).exists()
        ):
            continue  # still waiting for another upstream
        if trigger.debounce_seconds:
            FlowTrigger.objects.filter(pk=trigger.pk).update(
                fire_at=now + timedelta(seconds=trigger.debounce_seconds)
            )
            continue
        if execution_started := _fire(trigger, why):
            started.append(execution_started)
    return started


def fire_due(now: datetime | None = None) -> int:
    """Debounced triggers whose quiet time is up (only due rows, by the partial index)."""
    now = now or timezone.now()
    fired = 0
    with transaction.atomic():
        due = (
            FlowTrigger.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(fire_at__isnull=False, fire_at__lte=now)
            .select_related("flow", "flow__owner")
            .order_by("fire_at")[:BATCH]
        )
        for trigger in due:
            names = ", ".join(
                u.name
                for u in UpstreamDataset.objects.filter(trigger=trigger, committed_execution__isnull=False)
            )
            fired += bool(_fire(trigger, f"data: {names} committed (debounced)"))
    return fired


def _newest_file_ms(root: str) -> int:
    """The newest modification time (ms) of a file below `root`; 0 for none or no folder. A file
    whose real path lies outside the node (a symlink out of it) is not looked at: its time would
    tell the flow's owner when a file they were not granted changes."""
    newest = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            # hidden and Spark/Hadoop marker files are not data
            if name.startswith((".", "_")) or not confinement.is_inside(path, root):
                continue
            try:
                newest = max(newest, int(os.stat(path).st_mtime * 1000))
            except OSError:
                continue
    return newest


def _source_folder(flow: FlowConfig) -> str:
    """The local folder of the flow's files source node ("" when it has none to look into)."""
    node = DataNode.objects.filter(name=flow.source, kind=DataNode.Kind.FILES).first()
    path = str((node.properties or {}).get("path", "")) if node else ""
    if path.startswith("file://"):
        path = path[len("file://") :]
    if not path or "://" in path:
        return ""
    return path if os.path.isabs(path) else str(settings.FLOWPORT_DATA_DIR / path)


def check_files(now: datetime | None = None) -> int:
    """Look into the source folders whose watch is due; start the flows that got new files."""
    now = now or timezone.now()
    started = 0
    every = timedelta(seconds=settings.TRIGGER_FILES_POLL_SECONDS)
    with transaction.atomic():
        due = (
            FlowTrigger.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(on_files=True, files_check_at__lte=now)
            .select_related("flow", "flow__owner")
            .order_by("files_check_at")[:BATCH]
        )
        for trigger in due:
            flow = trigger.flow
            newest = _newest_file_ms(_source_folder(flow))
            mark, check_at = trigger.files_mark_ms, now + every
            if mark < 0:
                mark = newest  # the watch starts: what is there already is not an arrival
            elif newest > mark:
                mark = newest
                started += bool(_start(flow, FlowExecution.Trigger.FILES, f"files: new in {flow.source}"))
            FlowTrigger.objects.filter(pk=trigger.pk).update(files_mark_ms=mark, files_check_at=check_at)
    return started


def call_webhook(flow_group: str, flow_name: str, token: str) -> FlowExecution:
    """Run a flow for a webhook call bearing its token. WebhookRefused: no such flow, no token,
    a wrong or revoked one (told apart in the log only); WebhookNotRun: paused or over quota."""
    with transaction.atomic():
        trigger = (
            FlowTrigger.objects.select_for_update()
            .filter(flow__flow_group=flow_group, flow__flow_name=flow_name)
            .select_related("flow")
            .first()
        )
        if trigger is None or not token or not trigger.webhook_matches(token):
            logger.warning("webhook of %s/%s refused: no such flow or token", flow_group, flow_name)
            raise WebhookRefused()
        flow = trigger.flow
        if flow.paused:
            raise WebhookNotRun(f"{flow} is paused.")
        try:
            quota_gate.check_hourly(flow.pk)
        except QuotaExceeded as exc:
            raise WebhookNotRun(str(exc)) from None
        FlowTrigger.objects.filter(pk=trigger.pk).update(webhook_last_used=timezone.now())
        execution = create_execution(flow, FlowExecution.Trigger.WEBHOOK, requested_by="webhook")
        assert execution is not None  # no scheduled_at: never a duplicate tick
        return execution
