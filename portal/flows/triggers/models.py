"""Data triggers and freshness goals: what starts a flow besides its cron schedule, and how
fresh its destination datasets must be.

A flow may start when upstream datasets commit (another flow's destination datasets, `any` or
`all` of them, after a debounce), when files arrive in its source folder, or on a webhook
called with its own token. Its destination datasets may have a freshness goal: committed
within a span ("2h") or daily by a time of day ("06:00"). The catalog owns these settings
(saved with the flow's other settings); orchestration reacts to them (orchestration.control.triggers)
and monitoring reports a missed goal (monitoring.freshness).

Every lookup the reacting side makes is indexed: a commit reads the rows naming its flow
(`UpstreamDataset.upstream`), the loop reads only due debounces, due folder checks and due
freshness goals, never the whole catalog.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.db import models
from django.utils import timezone

from portal.flows.triggers.goals import goal_text, next_due

WEBHOOK_TOKEN_PREFIX = "fpw_"  # noqa: S105  # a token's marker, not a secret
MAX_UPSTREAMS = 20
MAX_DEBOUNCE_SECONDS = 24 * 3600


class FlowTrigger(models.Model):
    """One flow's data triggers (a row only for a flow that has some)."""

    class Mode(models.TextChoices):
        ANY = "any", "any upstream dataset commits"
        ALL = "all", "all upstream datasets have committed"

    flow = models.OneToOneField("flows.FlowConfig", on_delete=models.CASCADE, related_name="data_trigger")
    upstream_mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.ANY)
    debounce_seconds = models.PositiveIntegerField(
        default=0, help_text="Wait this long after the last upstream commit before starting."
    )
    skip_empty = models.BooleanField(
        default=False, help_text="An upstream commit that delivered no record does not start the flow."
    )
    # Set when the upstream condition holds and a debounce is due; the loop fires it then.
    fire_at = models.DateTimeField(null=True, blank=True)
    on_files = models.BooleanField(default=False, help_text="Run when new files arrive in the source folder.")
    files_check_at = models.DateTimeField(null=True, blank=True)
    files_mark_ms = models.BigIntegerField(default=0, help_text="Newest file time already run for.")
    # The webhook token: only its SHA-256 (256 random bits: a fast hash suffices, as for API tokens).
    webhook_token_hash = models.CharField(max_length=64, blank=True)
    webhook_token_hint = models.CharField(max_length=12, blank=True, help_text="Its first characters.")
    webhook_created = models.DateTimeField(null=True, blank=True)
    webhook_last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["fire_at"], name="flowtrigger_fire_at", condition=models.Q(fire_at__isnull=False)
            ),
            models.Index(
                fields=["files_check_at"],
                name="flowtrigger_files_check",
                condition=models.Q(on_files=True),
            ),
        ]

    def __str__(self) -> str:
        return f"triggers of {self.flow_id}"

    @property
    def has_webhook(self) -> bool:
        return bool(self.webhook_token_hash)

    def new_webhook_token(self) -> str:
        """A new token replacing any earlier one; returned once, only its hash kept."""
        token = WEBHOOK_TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.webhook_token_hash = hash_webhook_token(token)
        self.webhook_token_hint = token[: len(WEBHOOK_TOKEN_PREFIX) + 4]
        self.webhook_created = timezone.now()
        return token

    def webhook_matches(self, token: str) -> bool:
        return bool(self.webhook_token_hash) and hmac.compare_digest(
            self.webhook_token_hash, hash_webhook_token(token)
        )


def hash_webhook_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class UpstreamDataset(models.Model):
    """One upstream dataset a flow waits for: a flow's destination datasets (`dataset` empty: any
    of them) or one of them by its dataset.urn. `committed_execution` remembers a commit not yet
    consumed by a triggered run (the `all` mode waits until every row has one)."""

    trigger = models.ForeignKey(FlowTrigger, on_delete=models.CASCADE, related_name="upstreams")
    upstream = models.ForeignKey("flows.FlowConfig", on_delete=models.CASCADE, related_name="feeds")
    dataset = models.CharField(max_length=500, blank=True)
    committed_execution = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["trigger", "upstream", "dataset"], name="upstreamdataset_once")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        base = f"{self.upstream.flow_group}/{self.upstream.flow_name}"
        return f"{base}/{self.dataset}" if self.dataset else base


class FreshnessGoal(models.Model):
    """How fresh a flow's destination datasets must be (`dataset` empty: any commit of the flow's,
    else the one of that dataset.urn): committed within `within_seconds` of the last commit, or
    daily by `daily_by` (each day's deadline wants a commit since the one before).
    `due_at` is the next moment the goal is broken without a commit (indexed: the monitor reads
    only due goals); `stale_since` is set while it is broken (the dashboard's stale list)."""

    flow = models.ForeignKey("flows.FlowConfig", on_delete=models.CASCADE, related_name="freshness_goals")
    dataset = models.CharField(max_length=500, blank=True)
    within_seconds = models.PositiveIntegerField(null=True, blank=True)
    daily_by = models.TimeField(null=True, blank=True)
    last_commit_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField()
    stale_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["dataset"]
        constraints = [models.UniqueConstraint(fields=["flow", "dataset"], name="freshnessgoal_once")]
        indexes = [
            models.Index(
                fields=["due_at"], name="freshness_due", condition=models.Q(stale_since__isnull=True)
            ),
            models.Index(
                fields=["stale_since"], name="freshness_stale", condition=models.Q(stale_since__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flow_id}/{self.dataset or '*'}: {self.text}"

    @property
    def text(self) -> str:
        return goal_text(self.within_seconds, self.daily_by)

    def next_due(self, after: datetime) -> datetime:
        return next_due(self.within_seconds, self.daily_by, after)
