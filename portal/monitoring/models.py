"""Monitoring's own rows (events live in portal.events, below every app
that raises them).

HealthCheck rows remember the last verdict of each health probe (the broker,
a Spark master, an executor's worker heartbeat), so an event is raised once
per change of verdict, not on every poll, whichever portal process polls."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from portal.keys.fields import SealedCharField


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
    """One row: the /metrics figures that aggregate the whole history (data),
    kept in the background from per-slice counts (slices; see monitoring.history_counts)."""

    data = models.JSONField(default=dict)
    slices = models.JSONField(default=dict)
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
    on_recovery = models.BooleanField(
        default=False,
        help_text="The flow's latest outcome turns good again: a run, or a re-run job, commits after a failure.",
    )
    on_success = models.BooleanField(
        default=False, help_text="Every execution that commits (a recovery included)."
    )
    by_email = models.BooleanField(default=True, help_text="To the email address of your account.")
    # Checked by subscriptions.validate_webhook_url (http(s), allowed hosts),
    # not URLField's validator, so the error says what is wrong. Its path is often
    # a chat tool's token: the column holds it sealed under the master key.
    webhook_url = SealedCharField(max_length=500, blank=True, help_text="A POST per event (http or https).")

    class WebhookFormat(models.TextChoices):
        JSON = "json", "JSON (every field of the event)"
        CHAT = "chat", 'Chat message ({"text": …} for Slack, Mattermost, Teams incoming webhooks)'

    webhook_format = models.CharField(
        max_length=8,
        choices=WebhookFormat.choices,
        default=WebhookFormat.JSON,
        help_text="The shape of the webhook's body.",
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


class Delivery(models.Model):
    """One attempt to tell one subscriber of one event by one channel, kept so
    the subscription shows when it last got through and why it did not (a
    mail server refusing, a webhook answering 500) instead of a server log
    line only. The newest KEEP_DELIVERIES per subscription are kept."""

    class Status(models.TextChoices):
        DELIVERED = "DELIVERED", "delivered"
        RETRYING = "RETRYING", "failed, will retry"
        FAILED = "FAILED", "failed, gave up"

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=16, help_text="email or webhook")
    # The event's fields, not a key to it: events are pruned with the history.
    event_id = models.BigIntegerField()
    kind = models.CharField(max_length=64)
    execution_id = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    attempt = models.PositiveSmallIntegerField(help_text="1 for the first try of this event.")
    error = models.TextField(blank=True)
    retry_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["subscription", "-id"], name="delivery_newest")]

    def __str__(self) -> str:
        return f"{self.kind} to {self.subscription} by {self.channel}: {self.status}"
