"""The quota decisions, without the counting: orchestration counts the jobs in
flight and the executions started (it owns those rows) and asks here which
limit, if any, they reach. A flow owner with no quota of their own, where
staff set no default quota, gets the settings' default one (QUOTA_DEFAULT_*:
cores and memory per job, a priority range), so an ordinary user never asks
the workers for unbounded Spark; counting limits (jobs at once, executions per
hour) stay off until a quota sets them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Q
from rest_framework import exceptions, status

from portal.accounts.access import Principal, account
from portal.quotas.models import Quota

PRIORITY = "flow.priority"
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
# What a flow asks for its jobs' Spark: cores (a whole number) and memory (Spark's size: 512m, 2g).
SPARK_CORES, SPARK_MEMORY = "flow.spark.cores", "flow.spark.memory"
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)b?\s*", re.IGNORECASE)
_MIB = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}  # Spark reads a bare number as MiB
# Any constant: the one advisory lock every count-then-dispatch decision takes.
_LOCK_KEY = 0x466C6F77_51756F74  # "FlowQuot"


@dataclass(frozen=True)
class Tenant:
    """Whose job it is: the flow's owner and owning group."""

    user_id: int
    username: str
    group_id: int | None = None
    group_name: str = ""


@dataclass(frozen=True)
class Limit:
    scope: str  # Quota.Scope: USER (a user's own quota or the default), GROUP or EXECUTOR
    who: str  # as the messages name it: "alice", "group team-a", "executor x1"
    value: int


class QuotaExceeded(exceptions.APIException):
    """A hard quota refuses the request: 503, as Gobblin's QuotaExceededException,
    with the quota and whose it is in the body."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "quota_exceeded"

    def __init__(self, limit: Limit, used: int, what: str) -> None:
        self.limit, self.used = limit, used
        self.message = f"Quota exceeded: {limit.who} at {used} of {limit.value} {what}."
        body: Any = {
            "detail": self.message,
            "quota": what,
            "scope": limit.scope,
            "who": limit.who,
            "limit": limit.value,
            "used": used,
        }
        super().__init__(body)
        self.detail = body  # as is: the numbers stay numbers


def tenant_for(user: Principal, group: Any = None) -> Tenant:
    return Tenant(
        account(user).pk, user.get_username(), getattr(group, "pk", None), getattr(group, "name", "")
    )


def any_quota() -> bool:
    return Quota.objects.exists()


def serialise() -> None:
    """Hold the quota lock until the transaction ends, so two schedulers never
    both count 3 of 4 and both dispatch. SQLite writes one transaction at a
    time, so it needs none."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])


def _quotas(tenant: Tenant, executor: str | None = None) -> list[Quota]:
    wanted = Q(scope=Quota.Scope.DEFAULT) | Q(user_id=tenant.user_id)
    if tenant.group_id:
        wanted |= Q(group_id=tenant.group_id)
    if executor:
        wanted |= Q(executor__name=executor)
    return list(Quota.objects.filter(wanted).select_related("executor", "group"))


# The settings' default quota, by Quota field: what holds for an owner with none of their own.
_SETTINGS_DEFAULTS = {
    "max_cores_per_job": "QUOTA_DEFAULT_MAX_CORES_PER_JOB",
    "max_memory_mb_per_job": "QUOTA_DEFAULT_MAX_MEMORY_MB_PER_JOB",
    "max_priority": "QUOTA_DEFAULT_MAX_PRIORITY",
}


def _setting(field: str) -> int:
    return int(getattr(settings, _SETTINGS_DEFAULTS[field]))


def priority_floor(tenant: Tenant) -> Limit | None:
    """The lowest flow.priority the owner's flows may set: the settings' default quota's, for an
    owner with no quota of their own where staff set no default (a quota row has no floor)."""
    if Quota.objects.filter(Q(scope=Quota.Scope.DEFAULT) | Q(user_id=tenant.user_id)).exists():
        return None
    floor = int(getattr(settings, "QUOTA_DEFAULT_MIN_PRIORITY", MIN_PRIORITY))
    return Limit(Quota.Scope.DEFAULT, f"{tenant.username} (the default quota)", floor)


def _limits(tenant: Tenant, executor: str | None, field: str) -> list[Limit]:
    """The limits of one kind that apply: the user's own quota (or else the
    default), the owning group's, the executor's; each is checked on its own."""
    quotas = _quotas(tenant, executor)
    own = next((q for q in quotas if q.scope == Quota.Scope.USER), None)
    default = next((q for q in quotas if q.scope == Quota.Scope.DEFAULT), None)
    found: list[Limit] = []
    personal = own or default
    if personal is not None and getattr(personal, field) is not None:
        found.append(Limit(Quota.Scope.USER, tenant.username, getattr(personal, field)))
    elif personal is None and field in _SETTINGS_DEFAULTS:
        found.append(Limit(Quota.Scope.DEFAULT, f"{tenant.username} (the default quota)", _setting(field)))
    for quota in quotas:
        value = getattr(quota, field)
        if value is None:
            continue
        if quota.scope == Quota.Scope.GROUP and quota.group is not None:
            found.append(Limit(Quota.Scope.GROUP, f"group {tenant.group_name or quota.group.name}", value))
        elif quota.scope == Quota.Scope.EXECUTOR and quota.executor is not None:
            found.append(Limit(Quota.Scope.EXECUTOR, f"executor {quota.executor.name}", value))
    return found


def weights(user_ids: set[int]) -> dict[int, int]:
    """Each user's weight in the fair order: their own quota's, else the default's (1 without)."""
    rows = {
        q.user_id: q.weight
        for q in Quota.objects.filter(Q(user_id__in=user_ids) | Q(scope=Quota.Scope.DEFAULT))
    }
    default = rows.pop(None, 1)
    return {user_id: rows.get(user_id, default) for user_id in user_ids}


def concurrent_limits(tenant: Tenant, executor: str) -> list[Limit]:
    return _limits(tenant, executor, "max_concurrent_jobs")


def hourly_limits(tenant: Tenant) -> list[Limit]:
    return _limits(tenant, None, "max_executions_per_hour")


def first_reached(counts: list[tuple[Limit, int]]) -> tuple[Limit, int] | None:
    """The first limit whose count is already at (or past) it."""
    return next(((limit, used) for limit, used in counts if used >= limit.value), None)


def waiting_message(limit: Limit, used: int) -> str:
    return f"waiting: {limit.who} at {used} of {limit.value} concurrent jobs"


def check_hourly(counts: list[tuple[Limit, int]]) -> None:
    """Refuse one more execution when an hourly limit is reached."""
    if reached := first_reached(counts):
        raise QuotaExceeded(reached[0], reached[1], "executions started per hour")


def priority(properties: Mapping[str, object]) -> int:
    """A flow's flow.priority (0 unless set); higher goes first among one owner's waiting jobs."""
    value = properties.get(PRIORITY)
    if value is None or value == "":
        return 0
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValidationError({PRIORITY: f"must be a whole number, got {value!r}"}) from None
    if not MIN_PRIORITY <= number <= MAX_PRIORITY:
        raise ValidationError({PRIORITY: f"must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {number}"})
    return number


def max_priority(tenant: Tenant) -> Limit | None:
    """The lowest max_priority that applies to the tenant, if any."""
    limits = _limits(tenant, None, "max_priority")
    return min(limits, key=lambda limit: limit.value) if limits else None


def effective_priority(tenant: Tenant, properties: Mapping[str, object]) -> int:
    """The flow's priority, capped by its owner's limit (which staff may have
    lowered after the flow was saved)."""
    try:
        wanted = priority(properties)
    except ValidationError:
        wanted = 0
    cap = max_priority(tenant)
    return min(wanted, cap.value) if cap else wanted


def validate_flow(tenant: Tenant, properties: Mapping[str, object]) -> None:
    """Called where a flow is validated: a priority, cores or memory above the
    owner's (or group's) limit is refused naming the property and the quota (a
    request no wait would make fit: a 400, not a 503); a lower one is always
    allowed. An executor's own limit is checked when its job starts."""
    wanted = priority(properties)
    cap = max_priority(tenant)
    problems = {}
    if cap is not None and wanted > cap.value:
        problems[PRIORITY] = f"{wanted} is above {cap.who}'s quota max priority {cap.value}; set it lower"
    lowest = int(getattr(settings, "QUOTA_DEFAULT_MIN_PRIORITY", MIN_PRIORITY))
    if properties.get(PRIORITY) not in (None, "") and wanted < lowest:  # asked only then: one query less
        floor = priority_floor(tenant)
        if floor is not None:
            problems[PRIORITY] = (
                f"{wanted} is below {floor.who}'s lowest priority {floor.value}; set it higher"
            )
    caps = spark_caps(tenant, None)
    problems.update(_above(spark_request(properties), caps))
    problems.update(spark_conf_problems(properties, caps))
    if problems:
        raise ValidationError(problems)


# --- Spark resources per job --------------------------------------------------------------


@dataclass(frozen=True)
class SparkSizing:
    """What a job may hold: the cores and MiB its flow asks for, else its quota's."""

    cores: int | None = None
    memory_mb: int | None = None


class SizingRefused(Exception):
    """A flow asks for more Spark than its owner's quota allows now (it was lowered after the save)."""


def memory_mb(text: str) -> int | None:
    """A Spark memory size (512m, 2g, 1024) in MiB, or None when it is not one."""
    found = _SIZE.fullmatch(text)
    return int(int(found[1]) * _MIB[found[2].lower()]) if found else None


def spark_request(properties: Mapping[str, object]) -> SparkSizing:
    """The cores and memory a flow asks for (flow.spark.cores, flow.spark.memory), checked."""
    cores = memory = None
    if (value := properties.get(SPARK_CORES)) not in (None, ""):
        text = str(value).strip()
        if not text.isdigit() or not 1 <= int(text) <= 4096:
            raise ValidationError(
                {SPARK_CORES: f"must be a whole number of cores from 1 to 4096, got {value!r}"}
            )
        cores = int(text)
    if (value := properties.get(SPARK_MEMORY)) not in (None, ""):
        memory = memory_mb(str(value)) or 0
        if memory < 1:
            raise ValidationError(
                {SPARK_MEMORY: f"must be a Spark memory size such as 512m or 2g (at least 1m), got {value!r}"}
            )
    return SparkSizing(cores, memory)


def spark_caps(tenant: Tenant, executor: str | None) -> tuple[Limit | None, Limit | None]:
    """The lowest cores and memory per job that apply (the user's or default, group, executor)."""
    cores = _limits(tenant, executor, "max_cores_per_job")
    memory = _limits(tenant, executor, "max_memory_mb_per_job")
    return (
        min(cores, key=lambda limit: limit.value) if cores else None,
        min(memory, key=lambda limit: limit.value) if memory else None,
    )


def _above(wanted: SparkSizing, caps: tuple[Limit | None, Limit | None]) -> dict[str, str]:
    cores, memory = caps
    problems = {}
    if wanted.cores is not None and cores is not None and wanted.cores > cores.value:
        problems[SPARK_CORES] = (
            f"{wanted.cores} cores is above {cores.who}'s quota of {cores.value} cores per job; set it lower"
        )
    if wanted.memory_mb is not None and memory is not None and wanted.memory_mb > memory.value:
        problems[SPARK_MEMORY] = (
            f"{wanted.memory_mb} MiB is above {memory.who}'s quota of {memory.value} MiB per job; set it lower"
        )
    return problems


# Spark settings a flow may name under flow.spark.conf.* that hold cores or memory: what a quota
# caps cannot be raised through them (an executor count is at least a core each).
SPARK_CONF = "flow.spark.conf."
_CONF_CORES = ("spark.cores.max", "spark.executor.cores", "spark.driver.cores", "spark.task.cpus")
_CONF_COUNTS = ("spark.executor.instances", "spark.dynamicAllocation.maxExecutors",
                "spark.dynamicAllocation.initialExecutors", "spark.dynamicAllocation.minExecutors")  # fmt: skip
_CONF_MEMORY = ("spark.executor.memory", "spark.driver.memory", "spark.executor.memoryOverhead",
                "spark.driver.memoryOverhead", "spark.memory.offHeap.size", "spark.executor.pyspark.memory")  # fmt: skip


def spark_conf_problems(
    properties: Mapping[str, object], caps: tuple[Limit | None, Limit | None]
) -> dict[str, str]:
    """Key -> why a flow.spark.conf.* value asks for more cores or memory than the quota caps
    (or is not a number where one is due)."""
    cores, memory = caps
    problems = {}
    for key, value in sorted(properties.items()):
        name = key[len(SPARK_CONF) :] if key.startswith(SPARK_CONF) else ""
        text = str(value).strip()
        if name in _CONF_CORES or name in _CONF_COUNTS:
            if not text.isdigit():
                problems[key] = f"must be a whole number, got {value!r}"
            elif cores is not None and int(text) > cores.value:
                problems[key] = (
                    f"{text} is above {cores.who}'s quota of {cores.value} cores per job; set it lower"
                )
        elif name in _CONF_MEMORY:
            wanted = memory_mb(text)
            if wanted is None:
                problems[key] = f"must be a Spark memory size such as 512m or 2g, got {value!r}"
            elif memory is not None and wanted > memory.value:
                problems[key] = (
                    f"{wanted} MiB is above {memory.who}'s quota of {memory.value} MiB per job; set it lower"
                )
    return problems


def job_sizing(tenant: Tenant, executor: str, properties: Mapping[str, object]) -> SparkSizing:
    """The Spark a job of this flow may hold on `executor`: what the flow asks for, else its quota.
    A request past today's quota is refused (SizingRefused), never quietly cut down."""
    try:
        wanted = spark_request(properties)
    except ValidationError as error:
        raise SizingRefused("; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())) from None
    caps = spark_caps(tenant, executor)
    if problems := {**_above(wanted, caps), **spark_conf_problems(properties, caps)}:
        raise SizingRefused("; ".join(f"{key}: {text}" for key, text in problems.items()))
    cores, memory = caps
    return SparkSizing(
        wanted.cores if wanted.cores is not None else (cores.value if cores else None),
        wanted.memory_mb if wanted.memory_mb is not None else (memory.value if memory else None),
    )
