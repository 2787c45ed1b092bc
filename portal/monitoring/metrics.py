"""Prometheus metrics, computed from the database at scrape time by one
custom collector (the figures over the whole history from the snapshot the
scheduler keeps in bounded passes: history_counts). Nothing is counted in
process memory, so every web
process (gunicorn workers, several nodes) answers the same numbers and no
multiprocess directory is needed."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, Q
from django.http import HttpRequest
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from portal.monitoring.history_counts import DURATION_BUCKETS, history_snapshot
from portal.monitoring.models import HealthCheck
from portal.orchestration.models import (
    Action,
    ExecutionStatus,
    FlowExecution,
    JobStatus,
    OutboxMessage,
    WorkerHeartbeat,
)
from portal.topology.models import SpecExecutor


def _age(oldest, now) -> float:
    return max(0.0, (now - oldest).total_seconds()) if oldest else 0.0


class FlowportCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()

        history = history_snapshot()
        executions = GaugeMetricFamily(
            "flowport_flow_executions", "Flow executions by current status.", labels=["status"]
        )
        for status in ExecutionStatus.values:
            executions.add_metric([status], history["executions"].get(status, 0))
        yield executions

        jobs = GaugeMetricFamily("flowport_jobs", "Job executions by current status.", labels=["status"])
        for status in JobStatus.values:
            jobs.add_metric([status], history["jobs"].get(status, 0))
        yield jobs

        yield self._job_durations(history["durations"])

        records = CounterMetricFamily(
            "flowport_records_processed",
            "Records processed by committed jobs, by executor.",
            labels=["executor"],
        )
        for executor, total in history["records"]:
            records.add_metric([executor], total or 0)
        yield records
        yield GaugeMetricFamily(
            "flowport_history_metrics_age_seconds",
            "Age of the figures above (executions, jobs, durations, records, events): the scheduler "
            "recomputes them every METRICS_HISTORY_SECONDS, so a scrape never reads the whole history.",
            value=_age(datetime.fromisoformat(history["computed"]), now),
        )

        due = Action.objects.filter(done_at__isnull=True, due_at__lte=now).filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        )
        oldest_due = due.aggregate(oldest=Min("due_at"))["oldest"]
        yield GaugeMetricFamily(
            "flowport_scheduler_action_lag_seconds",
            "Age of the oldest due action no orchestrator has claimed (0 when none).",
            value=_age(oldest_due, now),
        )
        yield GaugeMetricFamily("flowport_actions_due", "Due, unclaimed actions.", value=due.count())
        oldest_pending = FlowExecution.objects.filter(status=ExecutionStatus.PENDING).aggregate(
            oldest=Min("created")
        )["oldest"]
        yield GaugeMetricFamily(
            "flowport_oldest_pending_execution_age_seconds",
            "Age of the oldest PENDING flow execution (not launched yet, or waiting for the topology).",
            value=_age(oldest_pending, now),
        )

        unsent = OutboxMessage.objects.filter(sent_at__isnull=True).aggregate(
            n=Count("id"), oldest=Min("created")
        )
        yield GaugeMetricFamily("flowport_outbox_backlog", "Outbox messages not sent yet.", value=unsent["n"])
        yield GaugeMetricFamily(
            "flowport_outbox_oldest_unsent_age_seconds",
            "Age of the oldest unsent outbox message (0 when none).",
            value=_age(unsent["oldest"], now),
        )

        alive_since = now - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
        yield GaugeMetricFamily(
            "flowport_workers_alive",
            "Worker processes whose heartbeat is recent (3 heartbeat intervals).",
            value=WorkerHeartbeat.objects.filter(last_seen__gte=alive_since).count(),
        )

        executors = GaugeMetricFamily(
            "flowport_executors", "Enabled SpecExecutors by health.", labels=["health"]
        )
        counts = dict(
            SpecExecutor.objects.filter(enabled=True)
            .values_list("health_status")
            .annotate(n=Count("id"))
            .order_by()
        )
        for health in SpecExecutor.Health.values:
            executors.add_metric([health], counts.get(health, 0))
        yield executors

        up = GaugeMetricFamily(
            "flowport_health_check_up",
            "1 when the broker / a Spark master answered the last probe, 0 when not.",
            labels=["kind", "target"],
        )
        for kind, target, status in HealthCheck.objects.exclude(
            status=HealthCheck.Status.SKIPPED
        ).values_list("kind", "target", "status"):
            up.add_metric([kind, target], 1 if status == HealthCheck.Status.UP else 0)
        yield up

        events = CounterMetricFamily("flowport_events", "Monitoring events raised, by kind.", labels=["kind"])
        for kind, n in history["events"]:
            events.add_metric([kind], n)
        yield events

    @staticmethod
    def _job_durations(rows: list[dict]) -> Metric:
        histogram = HistogramMetricFamily(
            "flowport_job_duration_seconds",
            "Run time of finished job attempts (start to end), by executor and status.",
            labels=["executor", "status"],
        )
        for row in rows:
            cumulative = [(str(float(bound)), row[f"le_{i}"]) for i, bound in enumerate(DURATION_BUCKETS)]
            cumulative.append(("+Inf", row["count"]))
            histogram.add_metric([row["executor"], row["status"]], cumulative, max(0.0, row["seconds"]))
        return histogram


registry = CollectorRegistry(auto_describe=False)
registry.register(FlowportCollector())


CONTENT_TYPE = CONTENT_TYPE_LATEST


def render() -> bytes:
    return generate_latest(registry)


def may_scrape(request: HttpRequest) -> bool:
    """The figures name executors, Spark masters and the broker, and say how busy the portal is:
    for a signed-in user, for a scraper sending MONITORING_METRICS_TOKEN as a bearer token
    (Prometheus' `authorization`), or for anyone when the operator sets MONITORING_METRICS_PUBLIC."""
    if settings.MONITORING_METRICS_PUBLIC or request.user.is_authenticated:
        return True
    token = settings.MONITORING_METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
