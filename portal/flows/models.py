"""The flow catalog: FlowConfig is GaaS's FlowSpec, keyed by (flowGroup, flowName)."""

from __future__ import annotations

import contextlib

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from portal.accounts import access
from portal.flows import policies as run_policies
from portal.flows.schedules import to_unix_cron, validate_schedule
from portal.flows.validators import validate_destinations, validate_name, validate_properties
from portal.templatepacks.uris import split_template_uris, validate_template_uris

# Gobblin flows named their endpoints in properties; honoured when the
# User Request triplet's source/destinations are not given explicitly.
SOURCE_PROPERTY = "gobblin.flow.sourceIdentifier"
DESTINATION_PROPERTY = "gobblin.flow.destinationIdentifier"


class FlowConfig(models.Model):
    class Compilation(models.TextChoices):
        PENDING = "PENDING", "pending"
        COMPILED = "COMPILED", "compiled"
        FAILED = "FAILED", "failed"

    # The last run states the list filters by: an execution's finished statuses,
    # its unfinished ones as one, and never run (the names of orchestration's
    # ExecutionStatus, which this app sits below).
    class LastRun(models.TextChoices):
        RUNNING = "RUNNING", "running or queued"
        COMMITTED = "COMMITTED", "committed"
        FAILED = "FAILED", "failed"
        CANCELLED = "CANCELLED", "cancelled"
        SKIPPED = "SKIPPED", "skipped"
        NEVER = "NEVER", "never run"

    UNFINISHED_RUN_STATUSES = ("PENDING", "COMPILED", "RUNNING")

    flow_group = models.CharField(max_length=128, validators=[validate_name])
    flow_name = models.CharField(max_length=128, validators=[validate_name])
    description = models.TextField(blank=True)
    schedule = models.CharField(
        max_length=200,
        blank=True,
        validators=[validate_schedule],
        help_text="Unix cron (5 fields) or Gobblin's Quartz form; empty runs once.",
    )
    run_immediately = models.BooleanField(default=False)
    template_uris = models.TextField(
        blank=True,
        validators=[validate_template_uris],
        help_text="Comma-separated pack://<pack>/<path>.template URIs.",
    )
    properties = models.JSONField(default=dict, blank=True, validators=[validate_properties])
    source = models.CharField(max_length=128, blank=True, validators=[validate_name])
    destinations = models.JSONField(default=list, blank=True, validators=[validate_destinations])
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="flows")
    # Gobblin's `owningGroup`: its members may change the flow like its owner.
    # Only a member may set it (portal.restli checks this on create and update).
    owning_group = models.ForeignKey(
        "auth.Group", on_delete=models.SET_NULL, null=True, blank=True, related_name="owned_flows"
    )
    # The schedule as its author wrote it (Quartz, as Gobblin's clients send it),
    # read back by the Rest.li layer while it still converts to `schedule`.
    schedule_given = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    compilation_status = models.CharField(
        max_length=16, choices=Compilation.choices, default=Compilation.PENDING
    )
    compilation_message = models.TextField(blank=True)
    # Airflow's on/off switch: a paused flow keeps its schedule but the
    # scheduler makes no executions from its ticks; on resume the ticks it
    # missed follow its catch-up policy (orchestration.control.scheduler).
    paused = models.BooleanField(default=False, db_index=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    # The flow's newest execution as of its last status change (kept by
    # orchestration.state.glance where executions are created and change status), so the
    # flow list filters by it with an index instead of reading execution history.
    last_run_id = models.BigIntegerField(null=True, blank=True, help_text="Its flowExecutionId.")
    last_run_status = models.CharField(max_length=16, blank=True, help_text="Empty: never run.")

    objects = access.AccessQuerySet.as_manager()  # restrict(user, action): flows.rules

    class Meta:
        ordering = ["flow_group", "flow_name"]
        constraints = [
            models.UniqueConstraint(fields=["flow_group", "flow_name"], name="flowconfig_unique_key"),
        ]
        indexes = [
            # "Last run failed" a page at a time, in the list's order, without a sort.
            models.Index(fields=["last_run_status", "flow_group", "flow_name"], name="flow_last_run_state"),
            # The flows over a data node (its page, an executor's change): flows.compiler.usernodes.
            models.Index(fields=["source"], name="flow_source"),
        ]

    def __str__(self) -> str:
        return f"{self.flow_group}/{self.flow_name}"

    def clean(self) -> None:
        # Stored once in unix form, so the scheduler never sees Quartz syntax.
        # A bad schedule is already reported under its field by its validator.
        with contextlib.suppress(ValidationError):
            self.schedule = to_unix_cron(self.schedule)
        if not self.source and self.properties.get(SOURCE_PROPERTY):
            self.source = self.properties[SOURCE_PROPERTY]
        if not self.destinations and self.properties.get(DESTINATION_PROPERTY):
            self.destinations = [
                d.strip() for d in self.properties[DESTINATION_PROPERTY].split(",") if d.strip()
            ]
        errors = {}
        for field, validator in (("source", validate_name), ("destinations", validate_destinations)):
            value = getattr(self, field)
            if value:
                try:
                    validator(value)
                except ValidationError as error:
                    errors[field] = error.messages
        try:
            run_policies.validate(self.properties or {})
        except ValidationError as error:
            errors["properties"] = [f"{key}: {'; '.join(msgs)}" for key, msgs in error.message_dict.items()]
        if errors:
            raise ValidationError(errors)

    @property
    def template_uri_list(self) -> list[str]:
        return split_template_uris(self.template_uris)

    @property
    def is_scheduled(self) -> bool:
        return bool(self.schedule)


class FlowRefresh(models.Model):
    """A flow whose compilation verdict a topology change may have changed:
    queued after the change commits, recompiled in the background
    (flows.refresh), and shown on the pages as "being refreshed"."""

    flow = models.OneToOneField(FlowConfig, on_delete=models.CASCADE, related_name="refresh")
    revision = models.BigIntegerField(help_text="TopologyRevision.number that asked for it.")
    requested = models.DateTimeField(auto_now=True)
    # The flow's owner when it was queued, only to batch: a batch takes one owner's
    # flows together (their template access is read once), in index order, so
    # claiming a batch does not sort the whole queue through a join.
    owner_key = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["owner_key", "flow"], name="flowrefresh_batch_order")]

    def __str__(self) -> str:
        return f"{self.flow_id} @ {self.revision}"


class RouteSummary(models.Model):
    """One row: the routing-relevant topology (best edge per node pair, the
    unusable executors, executor and node attributes copied into job specs)
    as of `applied_revision`. The refresh planner diffs the current topology
    against it to find the flows a change can affect."""

    applied_revision = models.BigIntegerField(default=0)
    routes = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"routes @ {self.applied_revision}"


class FlowGroup(models.Model):
    """A flow group's owner: a user, or a group (e.g. an LDAP group mirrored at login). Only they
    (and staff) create flows in it, so only they publish into ``<node>/<flowGroup>/…``. The first
    flow saved in a new group claims it for its owner; staff hand it to a group in the admin."""

    name = models.CharField(max_length=128, unique=True, validators=[validate_name])
    owner_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="flow_groups"
    )
    owner_group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="flow_groups"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(owner_user__isnull=False, owner_group__isnull=True)
                | models.Q(owner_user__isnull=True, owner_group__isnull=False),
                name="flowgroup_user_xor_group",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def owner_name(self) -> str:
        return f"user {self.owner_user}" if self.owner_user_id else f"group {self.owner_group}"

    def admits(self, user) -> bool:
        """May `user` own flows in this group?"""
        if user is None:
            return False
        if user.is_staff or user.is_superuser or self.owner_user_id == user.pk:
            return True
        return bool(self.owner_group_id) and user.groups.filter(pk=self.owner_group_id).exists()


class CompiledJobDag(models.Model):
    """The latest compiled job DAG of a flow (CompiledFlow.to_dict() without its
    verdict), read by `GET /api/flowconfigs/{group}/{name}/jobs`. The verdict
    (status, message) is the flow's own `compilation_status`/`_message` only:
    the flow list, its filter and the recompile select flows by it without a join."""

    flow = models.OneToOneField("FlowConfig", on_delete=models.CASCADE, related_name="compiled_dag")
    dag = models.JSONField(default=dict)
    topology_token = models.UUIDField(null=True, blank=True)
    # TopologyRevision.number the verdict was compiled against (see flows.refresh).
    revision = models.BigIntegerField(default=0)
    compiled_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Born in the topology app; the table kept its name when the model moved.
        db_table = "topology_compiledjobdag"

    def __str__(self) -> str:
        return f"{self.flow} (revision {self.revision})"


class CompiledHop(models.Model):
    """One hop of a flow's stored DAG, indexed: a topology change finds the
    flows it can affect (the ones routed over a changed edge, executor or
    data node) with an index lookup instead of reading every flow."""

    flow = models.ForeignKey("FlowConfig", on_delete=models.CASCADE, related_name="compiled_hops")
    source = models.CharField(max_length=128)
    destination = models.CharField(max_length=128)
    executor = models.CharField(max_length=128)

    class Meta:
        db_table = "topology_compiledhop"  # kept from the topology app, like CompiledJobDag
        indexes = [
            models.Index(fields=["source", "destination"], name="compiledhop_edge"),
            models.Index(fields=["executor"], name="compiledhop_executor"),
            models.Index(fields=["destination"], name="compiledhop_destination"),
        ]

    def __str__(self) -> str:
        return f"{self.flow_id}: {self.source} → {self.destination} on {self.executor}"


class FlowVersion(models.Model):
    """What a flow said at one save (flows.versions): made inside the one save
    service, never by a view, so no path saves a flow without one. Immutable;
    an execution names the version it compiled from (its number), and a re-run
    may compile an old one again."""

    flow = models.ForeignKey("FlowConfig", on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # The flow's editable fields as saved (properties as stored: secrets stay ENC(...)).
    spec = models.JSONField(default=dict)
    created_by = models.CharField(max_length=150, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["flow", "number"], name="flowversion_unique_number")]

    def __str__(self) -> str:
        return f"{self.flow_id} v{self.number}"


# Data triggers and freshness goals: their own room (flows.triggers), registered with the app here.
from portal.flows.triggers.models import FlowTrigger, FreshnessGoal, UpstreamDataset  # noqa: E402, F401
