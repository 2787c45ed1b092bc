"""Data-trigger start latency: from an upstream flow's dataset commit to the downstream flow's
execution created (and to its job RUNNING), beside a run-now through the same path measured in
the same run. Goal: commit → downstream execution p95 ≤ 2 s.

    .venv/bin/python tests/bench/bench_triggers.py [runs] [other flows]

Standalone (not a pytest test): a throw-away PostgreSQL database, a Redis database of its own
(BENCH_BROKER_URL, default redis://127.0.0.1:6379/12), one real `run_scheduler` process and one
real Celery worker (threads pool, local[2] Spark). A catalog of `other flows` (default 5,000),
each waiting for another one's datasets, sits beside the measured pair, so a lookup that grew
with the catalog would show. Each run: the upstream flow (100 numbers into the lake) is run now;
its dataset commit is the newest watermark history row of that execution (written by the worker);
the downstream flow (lake → archive) waits for that dataset. Timed, on this machine's clock:

  commit → downstream execution created   (the goal's figure)
  commit → downstream job RUNNING          (beside the reference below: the same path)
  run-now → job RUNNING                    (reference: bench_run_now's figure, same run)
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
GOAL_SECONDS = 2.0


def main(runs: int, others: int) -> int:
    admin_url = os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    broker = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")
    redis.Redis.from_url(broker).flushdb()
    db_name = f"flowport_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    tmp = Path(tempfile.mkdtemp(prefix="flowport-bench-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="portal.settings",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{db_name}",
        CELERY_BROKER_URL=broker,
        FLOWPORT_VAR_DIR=str(tmp / "var"),
        LOG_LEVEL="WARNING",
        FLOWPORT_PIPELINE_PACKAGES="tests",  # the counting source of tests/integration
        DATA_NODE_DEFAULT_ACCESS="open",  # the bench's nodes have no grants
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    try:
        return run(runs, others, tmp)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{db_name}" WITH (FORCE)')


def _catalog(owner, count: int) -> None:
    """`count` other flows, each waiting for the one before it (rows written in bulk)."""
    from portal.flows.models import FlowConfig
    from portal.flows.triggers.models import FlowTrigger, UpstreamDataset

    FlowConfig.objects.bulk_create(
        [
            FlowConfig(
                flow_group="other",
                flow_name=f"f{n:05d}",
                owner=owner,
                source="landing",
                destinations=["lake"],
            )
            for n in range(count)
        ],
        batch_size=2000,
    )
    ids = list(
        FlowConfig.objects.filter(flow_group="other").order_by("flow_name").values_list("pk", flat=True)
    )
    FlowTrigger.objects.bulk_create([FlowTrigger(flow_id=pk) for pk in ids[1:]], batch_size=2000)
    trigger_of = dict(FlowTrigger.objects.filter(flow_id__in=ids).values_list("flow_id", "pk"))
    UpstreamDataset.objects.bulk_create(
        [
            UpstreamDataset(trigger_id=trigger_of[down], upstream_id=up)
            for up, down in itertools.pairwise(ids)
        ],
        batch_size=2000,
    )


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.95 + 0.5) - 1)]


def run(runs: int, others: int, tmp: Path) -> int:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db.models import Max

    from portal.flows import services as flows
    from portal.flows.triggers import services as trigger_services
    from portal.orchestration import services
    from portal.orchestration.models import DatasetStateHistory, FlowExecution, JobExecution
    from portal.topology import services as topology
    from tests.integration.stack import Proc, start_worker, wait_until

    for name in ("landing", "lake", "archive"):
        (tmp / name).mkdir()
        topology.create_data_node({"name": name, "kind": "files", "properties": {"path": str(tmp / name)}})
    topology.create_executor(
        {"name": "bench", "technology": "spark-local", "spark_master": "local[2]", "queue": "bench.triggers"},
        capabilities=[("landing", "lake"), ("lake", "archive")],
    )
    owner = get_user_model().objects.create(username="bench")
    _catalog(owner, others)

    def create(name: str, source: str, destination: str, properties: dict[str, str]):
        flow = flows.create_flow(
            owner=owner,
            data={
                "flow_group": "bench",
                "flow_name": name,
                "source": source,
                "destinations": [destination],
                "properties": properties,
                "paused": True,  # no schedule = run once on save; the benchmark runs it itself
            },
        )
        return flows.set_paused(flow, False)

    upstream = create(
        "numbers",
        "landing",
        "lake",
        {
            "source.class": "tests.integration.sources.CountingSource",
            "writer.output.format": "json",
            "numbers.per.run": "100",
        },
    )
    downstream = create(
        "archive",
        "lake",
        "archive",
        {"source.files.format": "json", "source.files.datasets": "bench", "writer.output.format": "json"},
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(PYTHONUNBUFFERED="1", SPARK_LOG_LEVEL="ERROR")
    logs = tmp / "logs"
    scheduler = Proc("scheduler", [sys.executable, "manage.py", "run_scheduler"], env, logs)
    worker = start_worker("bench", ["bench.triggers"], env, logs)
    to_created: list[float] = []
    to_running: list[float] = []
    reference: list[float] = []

    def finished(execution: FlowExecution) -> bool:
        execution.refresh_from_db()
        return execution.status in ("COMMITTED", "FAILED", "CANCELLED", "SKIPPED")

    def started(execution: FlowExecution) -> JobExecution:
        return wait_until(
            lambda: JobExecution.objects.filter(execution=execution, started_at__isnull=False).first(),
            60,
            "the job to start",
        )

    try:
        scheduler.wait_for_log("scheduler started", timeout=60)
        for flow in (upstream, downstream):  # warm-up: the worker's SparkSession, both flows' paths
            warm = services.run_now(flow, user=owner)
            wait_until(lambda w=warm: finished(w), 180, "a warm-up run")
            print(f"warm-up {flow}: {warm.status} ({warm.message})")
        trigger_services.save_settings(downstream, {"upstream": ["bench/numbers"]})
        for n in range(runs):
            # The reference: a run-now of the downstream flow, to its job RUNNING.
            execution = services.run_now(downstream, user=owner)
            reference.append((started(execution).started_at - execution.created).total_seconds())
            wait_until(lambda e=execution: finished(e), 120, "the reference run to finish")
            # The measured path: the upstream commits, the downstream starts.
            before = set(FlowExecution.objects.filter(flow=downstream).values_list("pk", flat=True))
            up = services.run_now(upstream, user=owner)
            wait_until(lambda u=up: finished(u), 120, "the upstream run")
            assert up.status == "COMMITTED", up.message
            down = wait_until(
                lambda b=before: (
                    FlowExecution.objects.filter(flow=downstream, trigger="DATA").exclude(pk__in=b).first()
                ),
                30,
                "the downstream execution",
            )
            commit = DatasetStateHistory.objects.filter(
                state__flow_id=upstream.pk, execution_id=up.execution_id
            ).aggregate(at=Max("created"))["at"]
            to_created.append((down.created - commit).total_seconds())
            to_running.append((started(down).started_at - commit).total_seconds())
            wait_until(lambda d=down: finished(d), 120, "the downstream run")
            print(
                f"run {n + 1}: commit -> execution {to_created[-1] * 1000:.0f} ms, -> RUNNING {to_running[-1] * 1000:.0f} ms"
            )
    finally:
        worker.stop()
        scheduler.stop()
    created_50, created_95 = _percentiles(to_created)
    running_50, running_95 = _percentiles(to_running)
    ref_50, ref_95 = _percentiles(reference)
    print(
        f"runs:                                  {len(to_created)}, beside {others} other flows with triggers"
    )
    print(
        f"commit -> downstream execution:        p50 {created_50 * 1000:.0f} ms, p95 {created_95 * 1000:.0f} ms"
    )
    print(
        f"commit -> downstream job RUNNING:      p50 {running_50 * 1000:.0f} ms, p95 {running_95 * 1000:.0f} ms"
    )
    print(f"run-now -> job RUNNING (reference):    p50 {ref_50 * 1000:.0f} ms, p95 {ref_95 * 1000:.0f} ms")
    print(
        f"ratio to the reference (RUNNING):      p50 {running_50 / ref_50:.2f}x, p95 {running_95 / ref_95:.2f}x"
    )
    print(f"goal p95 <= {GOAL_SECONDS:.0f} s (execution created):  {created_95 / GOAL_SECONDS:.2f} of goal")
    print(f"scheduler action poll:                 {settings.ORCHESTRATOR_POLL_MILLIS} ms")
    return 0 if created_95 <= GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 20,
            int(sys.argv[2]) if len(sys.argv) > 2 else 5000,
        )
    )
