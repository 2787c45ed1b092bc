"""Quotas: how much of the shared executors one user, one group or everyone on
one executor may hold at a time, set by staff. Orchestration counts the use
and obeys them; this app only keeps the limits and decides (portal.quotas.services)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from portal.topology.models import SpecExecutor


class Quota(models.Model):
    class Scope(models.TextChoices):
        # The limits of every user without a quota of their own.
        DEFAULT = "DEFAULT", "default (each user)"
        USER = "USER", "user"
        # Counted over the flows the group owns (their owning group).
        GROUP = "GROUP", "group"
        # Counted over every job on the executor, whoever owns it.
        EXECUTOR = "EXECUTOR", "executor"

    scope = models.CharField(max_length=16, choices=Scope.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="quotas"
    )
    group = models.ForeignKey(
        "auth.Group", on_delete=models.CASCADE, null=True, blank=True, related_name="quotas"
    )
    executor = models.ForeignKey(
        SpecExecutor, on_delete=models.CASCADE, null=True, blank=True, related_name="quotas"
    )
    # Empty: no limit of that kind.
    max_concurrent_jobs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Jobs dispatched or running at once; more wait their turn."
    )
    max_executions_per_hour = models.PositiveIntegerField(
        null=True, blank=True, help_text="Executions started in any hour; a run past it is refused."
    )
    max_cores_per_job = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Spark cores a job may hold (flow.spark.cores may ask less): its own application's "
        "on YARN/Kubernetes; in a shared worker, its owner's FAIR pool's minShare.",
    )
    max_memory_mb_per_job = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="MiB for each Spark JVM of a job running as its own application (YARN/Kubernetes): "
        "driver and executors (flow.spark.memory may ask less).",
    )
    # A user's share of an executor's freed slots against other users who wait too (deficit round
    # robin: 2 takes twice what 1 takes). Read from the user's own quota, else the default.
    weight = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="A user's share of freed executor slots when several wait (2 gets twice a 1's); "
        "read from user and default quotas.",
    )
    max_priority = models.IntegerField(
        null=True, blank=True, help_text="The highest flow.priority the owner's flows may set."
    )
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["scope", "id"]
        constraints = [
            models.CheckConstraint(
                name="quota_target_fits_scope",
                condition=(
                    models.Q(scope="DEFAULT", user__isnull=True, group__isnull=True, executor__isnull=True)
                    | models.Q(scope="USER", user__isnull=False, group__isnull=True, executor__isnull=True)
                    | models.Q(scope="GROUP", user__isnull=True, group__isnull=False, executor__isnull=True)
                    | models.Q(
                        scope="EXECUTOR", user__isnull=True, group__isnull=True, executor__isnull=False
                    )
                ),
            ),
            models.UniqueConstraint(
                fields=["scope"], condition=models.Q(scope="DEFAULT"), name="one_default_quota"
            ),
            models.UniqueConstraint(fields=["user"], name="one_quota_per_user"),
            models.UniqueConstraint(fields=["group"], name="one_quota_per_group"),
            models.UniqueConstraint(fields=["executor"], name="one_quota_per_executor"),
        ]

    def __str__(self) -> str:
        return self.subject

    @property
    def subject(self) -> str:
        """Whose quota, as the waiting messages and the 503s name it."""
        if self.scope == self.Scope.USER and self.user is not None:
            return self.user.get_username()
        if self.scope == self.Scope.GROUP and self.group is not None:
            return f"group {self.group.name}"
        if self.scope == self.Scope.EXECUTOR and self.executor is not None:
            return f"executor {self.executor.name}"
        return "default"
