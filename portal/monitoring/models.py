"""Events: what the SLA and health monitors and the orchestrator want a
person to notice (an SLA miss, a dataset skipped by recovery, an executor
without a worker). The dashboard lists them and sinks forward them.

HealthCheck rows remember the last verdict of each health probe (the broker,
a Spark master, an executor's worker heartbeat), so an event is raised once
per change of verdict, not on every poll, whichever portal process polls."""

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


class HealthCheck(models.Model):
    class Status(models.TextChoices):
        UP = "UP", "up"
        DOWN = "DOWN", "down"
        SKIPPED = "SKIPPED", "not probed"

    key = models.CharField(
        max_length=600, unique=True, help_text="broker, spark_master:<url>, executor:<name>"
    )
    kind = models.CharField(max_length=32, help_text="broker, spark_master or executor")
    target = models.CharField(
        max_length=500, help_text="What was probed (URL without credentials, or a name)."
    )
    status = models.CharField(max_length=8, choices=Status.choices)
    detail = models.CharField(max_length=32, blank=True, help_text="Finer state, e.g. an executor's health.")
    message = models.TextField(blank=True)
    checked_at = models.DateTimeField()
    changed_at = models.DateTimeField()

    class Meta:
        ordering = ["kind", "target"]

    def __str__(self) -> str:
        return f"{self.key}: {self.status}"


class MetricsSnapshot(models.Model):
    """One row: the /metrics figures that aggregate the whole history,
    recomputed in the background (monitoring.metrics.refresh_history_snapshot)."""

    data = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"metrics snapshot {self.updated:%Y-%m-%d %H:%M:%S}"


class Subscription(models.Model):
    """One user's wish to hear about one flow: which events (failure, SLA
    miss, recovery) and where (their email address and/or a webhook). The
    operator's sinks (MONITORING_EMAIL_TO, MONITORING_WEBHOOK_URL) are apart
    from these; both are served by the same delivery pass (sinks.py)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="flow_subscriptions"
    )
    flow = models.ForeignKey("flows.FlowConfig", on_delete=models.CASCADE, related_name="subscriptions")
    on_failure = models.BooleanField(default=True, help_text="An execution failed.")
    on_sla_miss = models.BooleanField(
        default=True, help_text="A job did not start or the flow did not finish in time."
    )
    on_recovery = models.BooleanField(default=False, help_text="The first success after a failure.")
    by_email = models.BooleanField(default=True, help_text="To the email address of your account.")
    # Checked by subscriptions.validate_webhook_url (http(s), allowed hosts),
    # not URLField's validator, so the error says what is wrong.
    webhook_url = models.CharField(
        max_length=500, blank=True, help_text="A JSON POST per event (http or https)."
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["flow__flow_group", "flow__flow_name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "flow"], name="subscription_once_per_user_flow")
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.flow}"
