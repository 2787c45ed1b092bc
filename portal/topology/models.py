"""The topology catalog: data nodes, SpecExecutors and their capabilities.

A capability is one edge (source node → destination node) that one executor
can move data along; the flow compiler searches paths over these edges. A
data node a user made for themselves (`DataNode.user_made`) has no
capabilities: the executors whose routing policy serves its kind
(`SpecExecutor.user_sources` / `user_destinations`) carry it, per compile
(`graph.with_user_nodes`, docs/topology.md).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models

from portal.accounts import access
from portal.accounts.models import AccessRequest, AuditRecord, PrincipalGrant
from portal.pipeline import usernode
from portal.pipeline.dialects import dialect_for
from portal.pipeline.errors import ConfigError
from portal.topology.reach import catalog_problems, files_root_problem, node_problems
from portal.topology.validators import (
    MASTERS_FOR_TECHNOLOGY,
    NOT_YET_RUNNABLE_KINDS,
    not_yet_runnable,
    spark_master_kind,
    user_kinds,
    validate_connection_properties,
    validate_node_name,
    validate_queue_name,
    validate_spark_conf,
    validate_spark_master,
    validate_user_kinds,
)


class DataNode(models.Model):
    class Kind(models.TextChoices):
        JDBC = "jdbc", "JDBC database"
        ICEBERG = "iceberg", "Apache Iceberg tables (SQL catalog)"
        FILES = "files", "Files (local / HDFS / object store path)"
        HIVE = "hive", "Hive"
        KAFKA = "kafka", "Kafka"
        OTHER = "other", "Other"

    name = models.CharField(max_length=128, unique=True, validators=[validate_node_name])
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FILES)
    description = models.TextField(blank=True)
    properties = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_connection_properties],
        help_text="Connection properties (e.g. url, path). Secrets only as ENC(...) values.",
    )
    origin = models.CharField(max_length=500, blank=True, help_text="Topology file it was loaded from.")
    # Made by a user for themselves (or their group) under the administrators' policy
    # (topology.policy), not by an administrator: outside the topology snapshot, routed per compile.
    user_made = models.BooleanField(default=False, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = access.AccessQuerySet.as_manager()  # restrict(user, action): topology.rules

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        # The portal's own database and secrets are never a data node (docs/security.md).
        problems: dict[str, str] = {}
        if isinstance(self.properties, dict):
            problems = node_problems(self.kind, self.properties)
            url = self.properties.get("url")
            if self.kind == "jdbc" and isinstance(url, str) and url:
                try:  # Flowport speaks only the databases it has a SQL dialect for
                    dialect_for(url, "url")
                except ConfigError as error:
                    problems = {**problems, "url": str(error).removeprefix("url: ")}
            if self.kind == "iceberg":
                problems = {**catalog_problems(self.properties), **problems}
            if self.user_made:  # said as every refusal of a user-made node's database is said
                problems = {
                    key: usernode.REFUSED if key in ("url", "catalog.uri") and "portal" in reason else reason
                    for key, reason in problems.items()
                }
        errors: dict[str, list[str]] = {}
        if self.kind in NOT_YET_RUNNABLE_KINDS and not self._kept_kind():
            errors["kind"] = [not_yet_runnable(self.kind)]
        if problems:
            errors["properties"] = [f"{key}: {reason}" for key, reason in sorted(problems.items())]
        if errors:
            raise ValidationError(errors)

    def _kept_kind(self) -> bool:
        """A stored node that already is of this kind (made before the kind stopped being
        offered) keeps validating; a new node, or a change to it, does not."""
        return DataNode.objects.filter(name=self.name, kind=self.kind).exists()


class DataNodeGrant(PrincipalGrant):
    """Who may use a data node, like a template pack's ACL: owners may read and write (and are
    who an administrator asks), readers may use it as a flow's source, writers as a destination.
    A user or a group (an LDAP group mirrored at login). Staff may use every node."""

    class Role(models.TextChoices):
        OWNER = "owner", "owner"
        READ = "read", "read"
        WRITE = "write", "write"

    node = models.ForeignKey(DataNode, on_delete=models.CASCADE, related_name="grants")
    role = models.CharField(max_length=8, choices=Role.choices)

    class Meta(PrincipalGrant.Meta):
        constraints = [
            *PrincipalGrant.Meta.constraints,
            models.UniqueConstraint(fields=["node", "role", "user"], name="datanodegrant_unique_user"),
            models.UniqueConstraint(fields=["node", "role", "group"], name="datanodegrant_unique_group"),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.role} {self.principal}"


class DataNodeAccessRequest(AccessRequest):
    """A user's request to read from or write to a data node, answered by one of its owners
    (granting adds the grant through the audited change, topology.sharing)."""

    class Role(models.TextChoices):
        READ = "read", "read"
        WRITE = "write", "write"

    node = models.ForeignKey(DataNode, on_delete=models.CASCADE, related_name="access_requests")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.READ)

    class Meta(AccessRequest.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["node", "requested_by", "role"],
                condition=models.Q(decided_at__isnull=True),
                name="datanodeaccessrequest_one_open",
            )
        ]

    def __str__(self) -> str:
        return f"{self.requested_by} asks to {self.role} {self.node}"


class DataNodeAuditEvent(AuditRecord):
    """Who did what to a data node: created, changed, deleted it, changed its grants, asked for
    access or answered. Keyed by the node's name, so a deleted node's history survives it."""

    class Action(models.TextChoices):
        CREATE = "create", "created"
        UPDATE = "update", "changed"
        DELETE = "delete", "deleted"
        GRANTS = "grants", "grants changed"
        REQUEST = "request", "access requested"
        ANSWER = "answer", "request answered"

    node_name = models.CharField(max_length=128, db_index=True)
    action = models.CharField(max_length=16, choices=Action.choices)

    class Meta(AuditRecord.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.node_name} {self.action} by {self.actor}"


class DestinationTable(models.Model):
    """Whose a table of a destination node is (portal.topology.tables): a flow writes into a table
    only if the flow's owner owns it. The first flow to create a table records its owner (the
    unique constraint decides two at once); a table no flow made belongs to the node's owners;
    staff assign. ``name`` is the table as its database names it: ``schema.table`` (PostgreSQL),
    ``database.table`` (MySQL/MariaDB), ``table`` (SQLite), ``namespace.table`` (Iceberg)."""

    node = models.ForeignKey(DataNode, on_delete=models.CASCADE, related_name="tables")
    name = models.CharField(max_length=300)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who may write into it; empty: the node's owners.",
    )
    flow = models.CharField(max_length=300, blank=True, help_text="The flow that created it (group/name).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node__name", "name"]
        constraints = [models.UniqueConstraint(fields=["node", "name"], name="destinationtable_unique")]

    def __str__(self) -> str:
        return f"{self.node}: {self.name} ({self.owner or 'the node owners'})"


class NodeArea(models.Model):
    """A folder an administrator opens to one user or one group for the files (and Iceberg
    warehouse) nodes they make, beside the personal and group areas every user gets
    (USER_NODE_FILES_AREAS, topology.policy)."""

    path = models.CharField(
        max_length=500, help_text="A local folder; a relative one is under FLOWPORT_DATA_DIR."
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="nodearea_user_xor_group",
            ),
        ]

    def __str__(self) -> str:
        who = f"user {self.user}" if self.user_id else f"group {self.group}"
        return f"{self.path} ({who})"

    def clean(self) -> None:
        reason = files_root_problem(self.path) if self.path else None
        if reason is None and self.path and "://" in self.path:
            reason = f"'{self.path}' is not a local folder"
        if reason:
            raise ValidationError({"path": reason})


class SpecExecutor(models.Model):
    class Technology(models.TextChoices):
        SPARK_LOCAL = "spark-local", "Spark local"
        SPARK_STANDALONE = "spark-standalone", "Spark standalone"
        YARN = "yarn", "YARN"
        K8S = "k8s", "Kubernetes"

    class Health(models.TextChoices):
        """BUSY: consumed, but every job thread runs a live job, so new jobs
        wait. It routes as HEALTHY (busy is no fault), so a flip between the
        two is no topology change and recompiles no flow."""

        UNKNOWN = "UNKNOWN", "unknown"
        HEALTHY = "HEALTHY", "healthy"
        BUSY = "BUSY", "busy"
        DEGRADED = "DEGRADED", "degraded"
        UNHEALTHY = "UNHEALTHY", "unhealthy"

    name = models.CharField(max_length=128, unique=True, validators=[validate_node_name])
    uri = models.CharField(
        max_length=500,
        unique=True,
        blank=True,
        help_text="The TopologySpec URI; flowport://executors/<name> if empty.",
    )
    technology = models.CharField(max_length=32, choices=Technology.choices, default=Technology.SPARK_LOCAL)
    location = models.CharField(max_length=128, blank=True, help_text="Fabric or site name.")
    queue = models.CharField(
        max_length=200,
        blank=True,
        validators=[validate_queue_name],
        help_text="Communication mechanism: the Celery queue its workers consume; executor.<name> if empty.",
    )
    spark_master = models.CharField(max_length=500, default="local[*]", validators=[validate_spark_master])
    spark_conf = models.JSONField(default=dict, blank=True, validators=[validate_spark_conf])
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    cost = models.PositiveIntegerField(
        default=100, help_text="Preference when several paths have as many hops: lower wins."
    )
    # The routing policy for user-made data nodes: the kinds this executor reads as a flow's source
    # and writes as its destination, without a capability per node (graph.with_user_nodes).
    user_sources = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_user_kinds],
        help_text="Kinds of user-made data nodes it reads from (comma-separated: jdbc, files, iceberg), "
        "into every node it writes to.",
    )
    user_destinations = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_user_kinds],
        help_text="Kinds of user-made data nodes it writes to, from every node it reads from.",
    )
    health_status = models.CharField(max_length=16, choices=Health.choices, default=Health.UNKNOWN)
    health_message = models.TextField(blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    origin = models.CharField(max_length=500, blank=True, help_text="Topology file it was loaded from.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not self.uri and self.name:
            self.uri = f"flowport://executors/{self.name}"
        if not self.queue and self.name:
            self.queue = f"executor.{self.name}"
        for field in ("user_sources", "user_destinations"):  # one spelling: "jdbc,files"
            setattr(self, field, ",".join(dict.fromkeys(user_kinds(getattr(self, field)))))
        kind = spark_master_kind(self.spark_master)
        allowed = MASTERS_FOR_TECHNOLOGY.get(self.technology, ())
        if kind is not None and kind not in allowed:
            raise ValidationError(
                {"spark_master": f"{self.spark_master!r} does not fit technology {str(self.technology)!r}."}
            )

    @staticmethod
    def routing_health(status: str) -> str:
        """The health the compiler sees: BUSY routes as HEALTHY."""
        return SpecExecutor.Health.HEALTHY if status == SpecExecutor.Health.BUSY else status

    def serves_users(self, role: str) -> list[str]:
        """The kinds of user-made nodes it serves as a flow's `source` or `destination`."""
        return user_kinds(self.user_sources if role == "source" else self.user_destinations)

    @property
    def usable(self) -> bool:
        """The compiler only routes through enabled executors that are not known unhealthy."""
        return self.enabled and self.health_status != self.Health.UNHEALTHY


class Capability(models.Model):
    executor = models.ForeignKey(SpecExecutor, on_delete=models.CASCADE, related_name="capabilities")
    source = models.ForeignKey(DataNode, on_delete=models.PROTECT, related_name="outgoing")
    destination = models.ForeignKey(DataNode, on_delete=models.PROTECT, related_name="incoming")

    class Meta:
        ordering = ["executor__name", "source__name", "destination__name"]
        constraints = [
            models.UniqueConstraint(fields=["executor", "source", "destination"], name="capability_unique"),
            models.CheckConstraint(
                condition=~models.Q(source=models.F("destination")), name="capability_not_loop"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.executor.name}: {self.source.name} → {self.destination.name}"


class TopologyRevision(models.Model):
    """One row whose token changes with every topology change, in the same
    transaction. Compilers cache their adjacency index per token; a random
    token (not a counter) means a rolled-back change can never reuse a token
    that some process already cached for other contents."""

    token = models.UUIDField(default=uuid.uuid4)
    # A counter beside the token: the order of revisions, so a background
    # recompile made against an older topology never overwrites a newer verdict.
    number = models.BigIntegerField(default=0)
    changed = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return str(self.token)
