"""The freshness monitor: a flow's destination datasets not committed by their goal's due time
(flows.triggers.models.FreshnessGoal) raise `sla.dataset_stale`, an SLA miss like a flow's, so the same
subscriptions ("SLA miss") and sinks deliver it; the dashboard lists the stale datasets.

A pass reads only the goals that came due (the partial index on `due_at` of goals not stale yet),
at most BATCH of them, never every dataset; a commit (orchestration.control.triggers) moves the due time on
and clears the stale mark."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from portal.events.models import Event
from portal.events.services import raise_event
from portal.flows.triggers.models import FreshnessGoal

STALE = "sla.dataset_stale"
BATCH = 500


def check_freshness(now: datetime | None = None) -> int:
    """Mark the goals that came due stale and raise their event, once per due time."""
    now = now or timezone.now()
    raised = 0
    with transaction.atomic():
        due = (
            FreshnessGoal.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(stale_since__isnull=True, due_at__lte=now)
            .select_related("flow")
            .order_by("due_at")[:BATCH]
        )
        for goal in due:
            flow = goal.flow
            last = (
                f"last committed {goal.last_commit_at:%Y-%m-%d %H:%M %Z}"
                if goal.last_commit_at
                else "never committed"
            )
            what = f"Dataset {goal.dataset} of {flow} is" if goal.dataset else f"The datasets of {flow} are"
            message = (
                f"{what} stale: the goal is committed {goal.text}, due "
                f"{goal.due_at:%Y-%m-%d %H:%M %Z}; {last}."
            )
            raised += bool(
                raise_event(
                    STALE,
                    message,
                    severity=Event.Severity.ERROR,
                    dedupe_key=f"{STALE}:{flow.pk}/{goal.pk}@{int(goal.due_at.timestamp())}",
                    flow_group=flow.flow_group,
                    flow_name=flow.flow_name,
                    subject=f"{flow.flow_group}/{flow.flow_name}{'/' + goal.dataset if goal.dataset else ''}"[
                        :200
                    ],
                )
            )
            FreshnessGoal.objects.filter(pk=goal.pk).update(stale_since=goal.due_at)
    return raised


def stale_goals(limit: int = 20) -> list[FreshnessGoal]:
    """The stale datasets, longest stale first (the partial index on `stale_since`)."""
    return list(
        FreshnessGoal.objects.filter(stale_since__isnull=False)
        .select_related("flow")
        .order_by("stale_since")[:limit]
    )
