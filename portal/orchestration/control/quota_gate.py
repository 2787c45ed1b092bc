"""Quotas where jobs are dispatched: a ready job whose owner, group or executor
is at its concurrent-jobs limit stays PENDING with a message saying who is at
what ("waiting: alice at 4 of 4 concurrent jobs"), and when a slot frees the
waiters are dispatched in fair order (portal.quotas.fairshare), not first come
first served. Counts are COUNTs over the jobs in flight (the status index), never
over history. Every decision holds the quota lock (quotas.services.serialise)
until its transaction commits, so schedulers running side by side never both
take the last slot. Without any quota row nothing here runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.utils import timezone

from portal.flows.models import FlowConfig
from portal.orchestration.control.actions import enqueue_for
from portal.orchestration.models import (
    JOB_FINISHED,
    Action,
    ActionKind,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobStatus,
)
from portal.quotas import fairshare
from portal.quotas import services as quotas
from portal.quotas.models import Quota

IN_FLIGHT = (JobStatus.ORCHESTRATED, JobStatus.RUNNING)


def tenant_of(flow_id: int | None) -> quotas.Tenant | None:
    row = (
        FlowConfig.objects.filter(id=flow_id or 0)
        .values("owner_id", "owner__username", "owning_group_id", "owning_group__name")
        .first()
    )
    if row is None:
        return None
    return quotas.Tenant(
        row["owner_id"], row["owner__username"], row["owning_group_id"], row["owning_group__name"] or ""
    )


def trigger_class(trigger: str, job: JobExecution) -> int:
    """Scheduled runs first, then runs asked for now, then backfills and re-runs
    (a resumed job: a new attempt that is neither a retry nor a redelivery)."""
    if job.attempt > 1 and not job.retries and not job.redeliveries:
        return fairshare.CATCH_UP
    if trigger == FlowExecution.Trigger.SCHEDULE:
        return fairshare.SCHEDULED
    if trigger == FlowExecution.Trigger.BACKFILL:
        return fairshare.CATCH_UP
    return fairshare.ON_DEMAND


def _in_flight(limit: quotas.Limit, tenant: quotas.Tenant, executor: str) -> int:
    jobs = JobExecution.objects.filter(status__in=IN_FLIGHT)
    if limit.scope == Quota.Scope.EXECUTOR:
        return jobs.filter(executor=executor).count()
    if limit.scope == Quota.Scope.GROUP:
        return jobs.filter(execution__flow__owning_group_id=tenant.group_id).count()
    return jobs.filter(execution__flow__owner_id=tenant.user_id).count()


def _waiters(scope: Q) -> list[fairshare.Waiter]:
    rows = (
        JobExecution.objects.filter(scope, waiting_since__isnull=False, status=JobStatus.PENDING)
        .select_related("execution", "execution__flow")
        .only(
            "id", "job_name", "attempt", "retries", "redeliveries", "waiting_since", "executor", "execution",
            "execution__flow",
            "execution__trigger", "execution__flow_group", "execution__flow_name",
            "execution__execution_id", "execution__flow__owner_id", "execution__flow__owning_group_id",
            "execution__flow__properties",
        )
    )  # fmt: skip
    found = []
    for job in rows:
        flow = job.execution.flow
        owner = flow.owner_id if flow else 0
        found.append(
            fairshare.waiter(
                job,
                owner,
                trigger_class=trigger_class(job.execution.trigger, job),
                priority=_priority(flow),
                since=job.waiting_since or timezone.now(),
            )
        )
    return found


def _priority(flow: FlowConfig | None) -> int:
    if flow is None:
        return 0
    try:
        return quotas.priority(flow.properties or {})
    except Exception:  # a bad value stored before priorities were validated counts as 0
        return 0


def _in_flight_by_owner(executor: str) -> dict[int, int]:
    rows = (
        JobExecution.objects.filter(status__in=IN_FLIGHT, executor=executor)
        .values("execution__flow__owner_id")
        .annotate(n=Count("id"))
    )
    return {row["execution__flow__owner_id"] or 0: row["n"] for row in rows}


def _blocked_owners(owners: set[int]) -> set[int]:
    """Owners already at their own concurrent-jobs limit: their waiters take no
    executor slot in the fair order (they could not use it)."""
    if not owners:
        return set()
    quotas_by_user = {
        q.user_id: q.max_concurrent_jobs
        for q in Quota.objects.filter(Q(user_id__in=owners) | Q(scope=Quota.Scope.DEFAULT))
    }
    default = quotas_by_user.pop(None, None)
    limits = {owner: quotas_by_user.get(owner, default) for owner in owners}
    limited = {owner for owner, value in limits.items() if value is not None}
    if not limited:
        return set()
    counts = dict(
        JobExecution.objects.filter(status__in=IN_FLIGHT, execution__flow__owner_id__in=limited)
        .values_list("execution__flow__owner_id")
        .annotate(n=Count("id"))
    )
    return {owner for owner in limited if counts.get(owner, 0) >= limits[owner]}


class Gate:
    """One reevaluation's view of the quotas (read once, and only if any exist)."""

    def __init__(self, execution: FlowExecution) -> None:
        self.execution = execution
        self.active = quotas.any_quota()
        self.tenant = tenant_of(execution.flow_id) if self.active else None
        self.priority = 0
        if self.tenant is not None:
            flow = (
                FlowConfig.objects.filter(id=execution.flow_id or 0)
                .values_list("properties", flat=True)
                .first()
            )
            self.priority = quotas.effective_priority(self.tenant, flow or {})

    def hold(self, job: JobExecution) -> str | None:
        """Why `job` may not be dispatched now (the waiting message), or None."""
        if self.tenant is None:
            return None
        quotas.serialise()
        limits = quotas.concurrent_limits(self.tenant, job.executor)
        if not limits:
            return None
        counts = [(limit, _in_flight(limit, self.tenant, job.executor)) for limit in limits]
        if reached := quotas.first_reached(counts):
            return quotas.waiting_message(*reached)
        for limit, used in counts:
            if (ahead := self._ahead(limit, used, job)) is not None:
                return ahead
        return None

    def _ahead(self, limit: quotas.Limit, used: int, job: JobExecution) -> str | None:
        """With `free` slots left under `limit`, may this job take one, or do
        waiters that come before it in fair order take them all?"""
        assert self.tenant is not None  # hold() asks only with one
        if limit.scope == Quota.Scope.EXECUTOR:
            scope = Q(executor=job.executor)
        elif limit.scope == Quota.Scope.GROUP:
            scope = Q(execution__flow__owning_group_id=self.tenant.group_id)
        else:
            scope = Q(execution__flow__owner_id=self.tenant.user_id)
        others = [w for w in _waiters(scope) if w.key.pk != job.pk]
        if not others:
            return None
        blocked = _blocked_owners({w.owner for w in others} - {self.tenant.user_id})
        others = [w for w in others if w.owner not in blocked]
        me = fairshare.waiter(
            job,
            self.tenant.user_id,
            trigger_class=trigger_class(self.execution.trigger, job),
            priority=self.priority,
            since=job.waiting_since or timezone.now(),
        )
        free = limit.value - used
        in_flight = _in_flight_by_owner(job.executor) if limit.scope == Quota.Scope.EXECUTOR else {}
        weights = quotas.weights({w.owner for w in others} | {self.tenant.user_id})
        first = fairshare.fair_order([*others, me], in_flight, limit=free, weights=weights)
        if any(w.key.pk == job.pk for w in first):
            return None
        return (
            f"{quotas.waiting_message(limit, used)}; the {free} free slot(s) go first to "
            "waiting jobs ahead in fair order"
        )

    def wait(self, job: JobExecution, reason: str) -> None:
        """Keep the job PENDING, saying why, and look at it again later even if no wake-up comes."""
        fields = ["message"]
        job.message = reason
        if job.waiting_since is None:
            job.waiting_since = timezone.now()
            fields.append("waiting_since")
        job.save(update_fields=fields)
        enqueue_for(
            self.execution,
            ActionKind.REEVALUATE,
            job_name=job.job_name,
            due_at=timezone.now() + timedelta(seconds=settings.QUOTA_RECHECK_SECONDS),
        )

    def wake(self, jobs: list[JobExecution]) -> None:
        """After jobs of this execution finished (freeing slots): the waiters that
        may now go, in fair order, are reevaluated at once."""
        if self.tenant is None or not any(job.status in JOB_FINISHED for job in jobs):
            return
        woken: list[JobExecution] = []
        for executor in {job.executor for job in jobs}:
            # Only an executor's limit is shared by other owners: without one, this job's end
            # frees nothing for them (their own limits hold them).
            limit = next(
                (lim for lim in quotas.concurrent_limits(self.tenant, executor) if lim.scope == "EXECUTOR"),
                None,
            )
            if limit is None:
                continue
            in_flight = JobExecution.objects.filter(status__in=IN_FLIGHT, executor=executor).count()
            room = max(0, limit.value - in_flight)
            waiters = _waiters(Q(executor=executor)) if room else []
            blocked = _blocked_owners({w.owner for w in waiters})
            waiters = [w for w in waiters if w.owner not in blocked]
            weights = quotas.weights({w.owner for w in waiters})
            order = fairshare.fair_order(waiters, _in_flight_by_owner(executor), limit=room, weights=weights)
            woken += [w.key for w in order]
        # The owner's (and group's) own waiters, as many as their limits have room for.
        for limit in quotas.concurrent_limits(self.tenant, ""):
            if limit.scope == Quota.Scope.EXECUTOR:
                continue
            room = max(0, limit.value - _in_flight(limit, self.tenant, ""))
            if room:
                mine = _waiters(
                    Q(execution__flow__owner_id=self.tenant.user_id)
                    if limit.scope == Quota.Scope.USER
                    else Q(execution__flow__owning_group_id=self.tenant.group_id)
                )
                woken += [w.key for w in fairshare.fair_order(mine, {}, limit=room)]
        reevaluate_now([job for job in woken if job.execution_id != self.execution.pk])


def reevaluate_now(jobs: list[JobExecution]) -> None:
    """A REEVALUATE now for each job's execution, keyed by the job so it never
    moves the execution's own (a retry's backoff) REEVALUATE."""
    now = timezone.now()
    for job in {job.pk: job for job in jobs}.values():
        execution = job.execution
        moved = Action.objects.filter(
            kind=ActionKind.REEVALUATE,
            flow_group=execution.flow_group,
            flow_name=execution.flow_name,
            execution_id=execution.execution_id,
            job_name=job.job_name,
            done_at__isnull=True,
            claimed_by="",
        ).update(due_at=now)
        if not moved:
            enqueue_for(execution, ActionKind.REEVALUATE, job_name=job.job_name, due_at=now)


def started_in_the_last_hour(
    limit: quotas.Limit, tenant: quotas.Tenant, *, besides: int | None = None
) -> int:
    """Executions created in the last hour (by the created index), not counting skipped ones."""
    executions = FlowExecution.objects.filter(created__gte=timezone.now() - timedelta(hours=1)).exclude(
        status=ExecutionStatus.SKIPPED
    )
    if besides is not None:
        executions = executions.exclude(pk=besides)
    if limit.scope == Quota.Scope.GROUP:
        return executions.filter(flow__owning_group_id=tenant.group_id).count()
    return executions.filter(flow__owner_id=tenant.user_id).count()


def check_hourly(flow_id: int | None, *, besides: int | None = None) -> None:
    """Raise QuotaExceeded (a 503) when one more execution of the flow would pass
    its owner's or group's executions-per-hour quota."""
    if not quotas.any_quota() or (tenant := tenant_of(flow_id)) is None:
        return
    limits = quotas.hourly_limits(tenant)
    if not limits:
        return
    quotas.serialise()
    quotas.check_hourly(
        [(limit, started_in_the_last_hour(limit, tenant, besides=besides)) for limit in limits]
    )


# --- what the quotas page shows ----------------------------------------------------------


def _grouped(queryset: Any, key: str) -> dict[Any, int]:
    return {row[key]: row["n"] for row in queryset.values(key).annotate(n=Count("id")).order_by()}


def usage() -> list[dict[str, Any]]:
    """Each quota beside its use: jobs in flight, jobs waiting and executions
    started in the last hour. The default quota gets one row per user it holds
    who has jobs in flight or waiting. A few grouped COUNTs over jobs in flight,
    waiters and the last hour's executions, never over history."""
    in_flight = JobExecution.objects.filter(status__in=IN_FLIGHT)
    waiting = JobExecution.objects.filter(status=JobStatus.PENDING, waiting_since__isnull=False)
    hour = FlowExecution.objects.filter(created__gte=timezone.now() - timedelta(hours=1)).exclude(
        status=ExecutionStatus.SKIPPED
    )
    owner, group = "execution__flow__owner_id", "execution__flow__owning_group_id"
    counts = {
        Quota.Scope.USER: (
            _grouped(in_flight, owner),
            _grouped(waiting, owner),
            _grouped(hour, "flow__owner_id"),
        ),
        Quota.Scope.GROUP: (
            _grouped(in_flight, group),
            _grouped(waiting, group),
            _grouped(hour, "flow__owning_group_id"),
        ),
        Quota.Scope.EXECUTOR: (_grouped(in_flight, "executor"), _grouped(waiting, "executor"), {}),
    }
    quotas_ = list(Quota.objects.select_related("user", "group", "executor").order_by("scope", "id"))
    rows: list[dict[str, Any]] = []

    def row(quota: Quota, scope: str, key: Any, who: str) -> None:
        jobs, waiters, started = counts[scope]  # type: ignore[index]  # a Scope value as text
        rows.append(
            {
                "quota": quota,
                "who": who,
                "in_flight": jobs.get(key, 0),
                "waiting": waiters.get(key, 0),
                "started_last_hour": started.get(key, 0) if scope != Quota.Scope.EXECUTOR else None,
            }
        )

    own = {q.user_id for q in quotas_ if q.scope == Quota.Scope.USER}
    for quota in quotas_:
        if quota.scope == Quota.Scope.USER and quota.user is not None:
            row(quota, quota.scope, quota.user_id, quota.user.get_username())
        elif quota.scope == Quota.Scope.GROUP and quota.group is not None:
            row(quota, quota.scope, quota.group_id, f"group {quota.group.name}")
        elif quota.scope == Quota.Scope.EXECUTOR and quota.executor is not None:
            row(quota, quota.scope, quota.executor.name, f"executor {quota.executor.name}")
        else:
            busy = (set(counts[Quota.Scope.USER][0]) | set(counts[Quota.Scope.USER][1])) - own - {None}
            names = dict(get_user_model().objects.filter(pk__in=busy).values_list("pk", "username"))
            rows.append(
                {
                    "quota": quota,
                    "who": "every other user",
                    "in_flight": None,
                    "waiting": None,
                    "started_last_hour": None,
                }
            )
            for user_id in sorted(busy, key=lambda pk: names.get(pk, "")):
                row(quota, Quota.Scope.USER, user_id, f"{names.get(user_id, user_id)} (default)")
    return rows


def waiting_jobs(limit: int = 200) -> list[JobExecution]:
    """The jobs quotas hold back, longest waiting first, each with its reason."""
    return list(
        JobExecution.objects.filter(status=JobStatus.PENDING, waiting_since__isnull=False)
        .select_related("execution")
        .only("id", "job_name", "executor", "message", "waiting_since", "execution")
        .order_by("waiting_since", "id")[:limit]
    )
