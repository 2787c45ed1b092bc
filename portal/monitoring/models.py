"""Monitoring's own rows (events live in portal.events, below every app
that raises them).

HealthCheck rows remember the last verdict of each health probe (the broker,
a Spark master, an executor's worker heartbeat), so an event is raised once
per change of verdict, not on every poll, whichever portal process polls."""

from __future__ import annotations

from django.db import models


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
