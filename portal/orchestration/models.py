"""Executions of flows. A FlowExecution is created once per due cron tick (or
run-now request) and is the row every later step hangs off."""

from __future__ import annotations

from django.db import models

from portal.flows.models import FlowConfig


class ExecutionStatus(models.TextChoices):
    PENDING = "PENDING"
    COMPILED = "COMPILED"
    RUNNING = "RUNNING"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"


FINISHED_STATUSES = {
    ExecutionStatus.COMMITTED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.SKIPPED,
}


class FlowExecution(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "SCHEDULE", "cron tick"
        RUN_NOW = "RUN_NOW", "run now"
        RUN_IMMEDIATELY = "RUN_IMMEDIATELY", "run immediately on save"

    flow = models.ForeignKey(FlowConfig, on_delete=models.SET_NULL, null=True, related_name="executions")
    # Kept as text too, so history outlives a deleted flow.
    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    execution_id = models.BigIntegerField(help_text="Epoch milliseconds from the DB clock (flowExecutionId).")
    scheduled_at = models.DateTimeField(null=True, blank=True, help_text="The cron tick; empty for run-now.")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING)
    message = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-execution_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow_group", "flow_name", "execution_id"], name="execution_id_per_flow"
            ),
            models.UniqueConstraint(
                fields=["flow", "scheduled_at"],
                condition=models.Q(scheduled_at__isnull=False),
                name="one_execution_per_tick",
            ),
        ]
        indexes = [models.Index(fields=["status", "created"])]

    def __str__(self) -> str:
        return f"{self.flow_group}/{self.flow_name}#{self.execution_id}"


class ScheduleCursor(models.Model):
    """The last tick the schedulers have turned into an execution, per flow.
    Any scheduler may advance it; row locks keep two from doing it at once."""

    flow = models.OneToOneField(FlowConfig, on_delete=models.CASCADE, related_name="schedule_cursor")
    schedule = models.CharField(max_length=200)
    last_tick = models.DateTimeField()
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.flow} at {self.last_tick:%Y-%m-%d %H:%M}"
