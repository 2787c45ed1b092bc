"""Spark resources per job under quotas, where the executor can enforce them.

A job that runs as its own Spark application (spark-submit: YARN, Kubernetes)
is sized to what its flow asks for (flow.spark.cores, flow.spark.memory) or else
to its quota (portal.orchestration.worker.submit.sized_conf). Inside a worker's shared,
long-lived SparkSession Spark cannot cap one job's cores: there the job's tasks
run in its owner's FAIR pool, whose weight is the owner's quota weight and
whose minShare is the cores the job may hold (what the pool is given first when
pools contend). Everywhere, a job whose flow asks for more than its quota allows
today does not start (the save refused it already, unless the quota was lowered
since or an executor's own limit is lower)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.flows.models import FlowConfig
from portal.orchestration.models import JobExecution
from portal.quotas import services as quotas


@dataclass(frozen=True)
class PoolShape:
    """A FAIR pool of the worker's session: Spark fixes weight and minShare when
    the pool is made, so a new shape is a new pool (its name says the shape)."""

    name: str
    weight: int = 1
    min_share: int = 0


def _flow(job: JobExecution) -> tuple[quotas.Tenant, dict[str, Any]] | None:
    row = (
        FlowConfig.objects.filter(id=job.execution.flow_id or 0)
        .values("owner_id", "owner__username", "owning_group_id", "owning_group__name", "properties")
        .first()
    )
    if row is None or row["owner_id"] is None:
        return None
    tenant = quotas.Tenant(
        row["owner_id"], row["owner__username"], row["owning_group_id"], row["owning_group__name"] or ""
    )
    return tenant, dict(row["properties"] or {})


def sizing_refusal(job: JobExecution) -> str:
    """Why the job may not start (its flow asks for more Spark than its quota allows now, the
    settings' default quota included), or ""."""
    if (found := _flow(job)) is None:
        return ""
    try:
        quotas.job_sizing(found[0], job.executor, found[1])
    except quotas.SizingRefused as refused:
        return f"Not started: the flow asks for more Spark than its quota allows: {refused}"
    return ""


def spark_sizing(job: JobExecution | None) -> dict[str, int]:
    """The cores and MiB the job's own Spark application may hold ({} when nothing limits it): the
    flow's request, else its owner's quota — the default one (``QUOTA_DEFAULT_*``) for an owner
    without a quota of their own, quota rows or none."""
    if job is None or (found := _flow(job)) is None:  # None: a run outside the orchestrator
        return {}
    try:
        sizing = quotas.job_sizing(found[0], job.executor, found[1])
    except quotas.SizingRefused:
        return {}  # sizing_refusal stopped the job before its Spark started
    return {
        key: value
        for key, value in (("cores", sizing.cores), ("memory_mb", sizing.memory_mb))
        if value is not None
    }


def spark_pool(job: JobExecution) -> PoolShape | None:
    """The FAIR pool a job's tasks run in inside a shared worker: its owner's
    once quotas are in use (owners then share the worker's Spark by weight,
    however many tasks each runs), else none (one pool per task, as without
    quotas)."""
    if not quotas.any_quota() or (found := _flow(job)) is None:
        return None
    tenant, _ = found
    weight = quotas.weights({tenant.user_id})[tenant.user_id]
    cores = spark_sizing(job).get("cores", 0)
    name = (
        f"owner-{tenant.username}" + (f".w{weight}" if weight != 1 else "") + (f".c{cores}" if cores else "")
    )
    return PoolShape(name, weight, cores)
