"""Events: what the SLA and health monitors and the orchestrator want a
person to notice (an SLA miss, a dataset skipped by recovery, an executor
without a worker). The dashboard lists them and sinks forward them.

A low-level app of its own, so every app that raises events (orchestration,
monitoring) imports it downwards."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Event(models.Model):
    class Severity(models.TextChoices):
        INFO = "INFO"
        WARNING = "WARNING"
        ERROR = "ERROR"

    kind = models.CharField(max_length=64, help_text="e.g. sla.flow_finish_missed, executor.unhealthy")
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    flow_group = models.CharField(max_length=128, blank=True)
    flow_name = models.CharField(max_length=128, blank=True)
    execution_id = models.BigIntegerField(null=True, blank=True)
    job_name = models.CharField(max_length=300, blank=True)
    subject = models.CharField(max_length=200, blank=True, help_text="An executor or dataset name.")
    message = models.TextField()
    created = models.DateTimeField(auto_now_add=True)
    # Monitors that must raise an event once (per execution, per transition)
    # give it a key; a second raise with the same key is a no-op.
    dedupe_key = models.CharField(max_length=400, blank=True)
    # Forwarding to the configured sinks (email, webhook), after commit.
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivered_to = models.JSONField(default=list, blank=True, help_text="Sinks that accepted it.")
    delivery_attempts = models.PositiveSmallIntegerField(default=0)
    delivery_lease_until = models.DateTimeField(null=True, blank=True)
    delivery_error = models.TextField(blank=True)

    class Meta:
        # Born in the monitoring app; the table kept its name when the model moved.
        db_table = "monitoring_event"
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["kind", "created"]),
            models.Index(fields=["created"], name="event_created"),
            models.Index(fields=["delivered_at", "created"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["dedupe_key"], condition=~models.Q(dedupe_key=""), name="event_dedupe_key_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message[:60]}"


class FlowOutcome(models.Model):
    """A flow's latest finished outcome: good (an execution committed) or not
    (one failed). "Recovered" means this turned good, whichever execution
    turned it: a new run, or a re-run job that committed a failed execution
    (which the flow's history by execution id cannot see). Keyed by the flow's
    names, like events, so it outlives the flow's row."""

    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    good = models.BooleanField()
    execution_id = models.BigIntegerField(help_text="The execution whose end set it.")
    changed = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["flow_group", "flow_name"], name="one_outcome_per_flow")
        ]

    def __str__(self) -> str:
        return f"{self.flow_group}/{self.flow_name}: {'good' if self.good else 'failed'}"


class Notification(models.Model):
    """One event as one user reads it in the portal (their alerts page): a
    copy of the event's fields as that user may read them (events are pruned
    with the history; a message may be redacted for them), and whether they
    have read it. Written by the in-portal sink (events.notifications); every
    query is scoped to one user."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    event_id = models.BigIntegerField()
    kind = models.CharField(max_length=64)
    severity = models.CharField(max_length=8, choices=Event.Severity.choices)
    flow_group = models.CharField(max_length=128, blank=True)
    flow_name = models.CharField(max_length=128, blank=True)
    execution_id = models.BigIntegerField(null=True, blank=True)
    message = models.TextField()
    created = models.DateTimeField(help_text="When the event was raised.")
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["user", "-id"], name="notification_newest"),
            models.Index(fields=["user", "read_at"], name="notification_unread"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["user", "event_id"], name="notification_once_per_user_event")
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.user_id}: {self.message[:60]}"
