"""The control plane at real size (issue #18), on PostgreSQL.

    .venv/bin/python tests/bench/bench_scale.py [--flows 50000] [--jobs 5000000] [--events 1000000]

Generates a catalog with bulk inserts (COPY, not the API): the demo topology
and template pack, `--flows` flows (copies of the demo flow with mixed cron
schedules, each compiled once), `--jobs` job executions (two hops per flow
execution, spread over 120 days), `--events` events and a watermark per
flow. It does this twice in the same run — at the full size and at 1/100 of
it, each in a throw-away database (`BENCH_DATABASE_ADMIN_URL`, default
postgres://postgres@127.0.0.1:5432/postgres; `--db-name` names them) — and
prints each figure beside its goal and beside the same figure at 1/100: the
ratio shows how the cost grows with the data (1.0 = not at all).

Figures: a topology change (disable/enable an executor, a health flip) to
commit; the background recompile it causes (flows/s); one compile; each main
page and API list p95 and its query count; one scheduler pass over all
scheduled flows; history retention (rows/s). Benchmarks are not tests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CRONS = ["*/5 * * * *", "0 * * * *", "*/15 * * * *", "30 2 * * *", "* * * * *", "0 */6 * * *", "10 * * * *"]
GOALS = {  # figure -> (goal, unit, lower is better)
    "topology change commits (set_enabled)": (50.0, "ms", True),
    "health flip commits (record_health)": (50.0, "ms", True),
    "background recompile, one scheduler": (2000.0, "flows/s", False),
    "compile only, every flow (no writes)": (2000.0, "flows/s", False),
    "one compile (demo flow, warm)": (1.0, "ms", True),
    "scheduler pass, nothing due": (100.0, "ms", True),
    "tick lag at that minute, worst (poll + burst, ms)": (2000.0, "ms", True),
    "retention prune": (5000.0, "rows/s", False),
}
PAGE_GOAL_MS = 150.0


# --- generation ----------------------------------------------------------------------


def setup_django(db_name: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["DATABASE_URL"] = (
        f"{os.environ.get('BENCH_PG_SERVER', 'postgres://postgres@127.0.0.1:5432')}/{db_name}"
    )
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _neutral_columns(table: str, given: list[str]) -> list[tuple[str, str]]:
    """Every other NOT NULL column of `table` without a database default, with a neutral
    value of its type, so the generator does not repeat each model's defaults (and keeps
    working when a model gains a column)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = %s ORDER BY ordinal_position",
            [table],
        )
        columns = cursor.fetchall()
    extra = []
    for name, data_type, nullable, default in columns:
        if name in given or nullable == "YES" or (default or "").startswith("nextval"):
            continue
        if name == "id":
            continue
        value = {
            "jsonb": "{}",
            "boolean": "f",
            "integer": "0",
            "bigint": "0",
            "smallint": "0",
            "timestamp with time zone": datetime.now(UTC).isoformat(),
        }.get(data_type, "")
        extra.append((name, value))
    return extra


def _copy(table: str, rows, overrides_order: list[str]) -> None:
    """COPY rows (tuples in `overrides_order`) into `table`; the other columns get neutral values."""
    from django.db import connection

    extra = _neutral_columns(table, overrides_order)
    names = overrides_order + [name for name, _ in extra]
    tail = [value for _, value in extra]
    raw = connection.connection  # the psycopg connection under Django's
    with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([*row, *tail])


def generate(flows: int, jobs: int, events: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from portal.flows.management.commands.load_demo import DEMO_FLOW, load_pack
    from portal.flows.models import FlowConfig
    from portal.templatepacks.models import PackAcl, TemplatePack
    from portal.topology.models import DataNode, DataNodeGrant
    from portal.topology.services import load_topology_file

    user_model = get_user_model()
    admin = user_model.objects.create(username="admin", is_staff=True, is_superuser=True)
    owners = user_model.objects.bulk_create(user_model(username=f"owner{n}") for n in range(50))
    load_topology_file(ROOT / "portal" / "topology" / "demo_topology.yaml")
    load_pack(admin)
    teams = Group.objects.create(name="teams")
    teams.user_set.add(*owners)
    PackAcl.objects.create(pack=TemplatePack.objects.get(name="demo-pack"), role="reader", group=teams)
    # The teams may use the demo nodes, so the catalog compiles (nodes are closed by default).
    DataNodeGrant.objects.bulk_create(
        DataNodeGrant(node=node, role=role, group=teams)
        for node in DataNode.objects.all()
        for role in (DataNodeGrant.Role.READ, DataNodeGrant.Role.WRITE)
    )
    now = datetime.now(UTC)
    started = time.perf_counter()
    props = json.dumps(DEMO_FLOW["properties"])
    _copy(
        "flows_flowconfig",
        (
            (
                f"team{n % 500}",
                f"flow{n:06d}",
                CRONS[n % len(CRONS)],
                DEMO_FLOW["template_uris"],
                props,
                "landing",
                '["archive"]',
                owners[n % len(owners)].pk,
                now.isoformat(),
                now.isoformat(),
                "PENDING",
            )
            for n in range(flows)
        ),
        [
            "flow_group",
            "flow_name",
            "schedule",
            "template_uris",
            "properties",
            "source",
            "destinations",
            "owner_id",
            "created",
            "updated",
            "compilation_status",
        ],
    )
    flow_rows = list(
        FlowConfig.objects.order_by("pk").values_list("pk", "flow_group", "flow_name", "schedule")
    )
    _copy(
        "orchestration_schedulecursor",
        ((pk, sched, now.isoformat(), now.isoformat()) for pk, _g, _n, sched in flow_rows),
        ["flow_id", "schedule", "last_tick", "updated"],
    )
    executions = max(1, jobs // 2)
    span_ms = 120 * 86400 * 1000
    base_ms = int(now.timestamp() * 1000) - span_ms

    def execution_rows():
        for i in range(executions):
            pk, group, name, _ = flow_rows[i % len(flow_rows)]
            at_ms = base_ms + (i * span_ms) // executions
            at = datetime.fromtimestamp(at_ms / 1000, UTC)
            status = "FAILED" if i % 20 == 0 else "COMMITTED"
            if i > executions - 20:
                status = "RUNNING"
            yield (pk, group, name, at_ms, "SCHEDULE", status, at.isoformat(), at.isoformat(), at.isoformat())

    _copy(
        "orchestration_flowexecution",
        execution_rows(),
        [
            "flow_id",
            "flow_group",
            "flow_name",
            "execution_id",
            "trigger",
            "status",
            "created",
            "started_at",
            "ended_at",
        ],
    )
    given = (
        "execution_id, job_name, job_group, hop_index, executor, queue, spark_master, parents, spec, status, "
        "status_rank, attempt, retries, max_retries, cancel_requested, message, processed_count, low_watermark, "
        "high_watermark, spark_ui_url, progress, task_states, log_excerpt, driver_log_excerpt, worker, started_at, "
        "ended_at"
    )
    extra = _neutral_columns("orchestration_jobexecution", [c.strip() for c in given.split(",")])
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO orchestration_jobexecution ({given}{''.join(', ' + n for n, _ in extra)}) "  # noqa: S608
            "SELECT e.id, e.flow_group || '.' || e.flow_name || '.' || h.hop || '-hop', e.flow_group, h.hop, "
            "'spark-local-ingest', 'executor.spark-local-ingest', 'local[*]', '[]', '{}', e.status, 0, 1, 0, 0, "
            "false, '', 1000, '', '', '', '{}', '[]', '', '', '', e.started_at, e.ended_at"
            + "".join(", %s" for _ in extra)
            + " FROM orchestration_flowexecution e CROSS JOIN (VALUES (1), (2)) AS h(hop)",
            [value for _, value in extra],
        )
    _copy(
        "monitoring_event",
        (
            (
                "sla.flow_finish_missed" if n % 3 else "executor.unhealthy",
                "WARNING",
                flow_rows[n % len(flow_rows)][1],
                flow_rows[n % len(flow_rows)][2],
                "late",
                (now - timedelta(seconds=(n * 120 * 86400) // max(1, events))).isoformat(),
            )
            for n in range(events)
        ),
        ["kind", "severity", "flow_group", "flow_name", "message", "created"],
    )
    _copy(
        "orchestration_datasetstate",
        (
            (g, n, f"{g}.{n}.1-landing-to-lake", f"files://landing/{n}", "1000", now.isoformat())
            for _pk, g, n, _s in flow_rows
        ),
        ["flow_group", "flow_name", "job_name", "dataset_urn", "watermark", "updated"],
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO orchestration_datasetstatehistory (state_id, previous_watermark, watermark, status, "
            "records, reason, changed_by, source_schema, created) SELECT id, '0', watermark, 'COMMITTED', "
            "1000, '', '', '', now() - (id % 120) * interval '1 day' FROM orchestration_datasetstate"
        )
        cursor.execute("ANALYZE")
    return {"generate_s": time.perf_counter() - started, "flows": len(flow_rows), "executions": executions}


# --- measurements ------------------------------------------------------------------------


def _ms(func, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        func()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(flows: int) -> dict:
    from django.db import connection, connections
    from django.test import Client
    from django.utils import timezone

    from portal.flows import refresh
    from portal.flows.compiler import compile_flow
    from portal.flows.compiler.templates import BatchTemplates
    from portal.flows.models import FlowConfig
    from portal.orchestration.control.scheduler import schedule_due_ticks
    from portal.orchestration.models import FlowExecution
    from portal.orchestration.state.retention import prune_history
    from portal.topology import services
    from portal.topology.graph import current_snapshot
    from portal.topology.models import SpecExecutor

    figures: dict[str, float] = {}
    # First compile of every flow, as after an upgrade: the planner queues all.
    started = time.perf_counter()
    refresh.drain()
    figures["initial compile of the catalog (s)"] = time.perf_counter() - started

    # A topology change commits; then its background recompile.
    ingest = SpecExecutor.objects.get(name="spark-local-ingest")
    toggles = []
    for _ in range(5):
        toggles += _ms(lambda: services.set_enabled(ingest, False), 1)
        toggles += _ms(lambda: services.set_enabled(ingest, True), 1)
    figures["topology change commits (set_enabled)"] = statistics.median(toggles)
    refresh.drain()
    flips = []
    for _ in range(5):
        flips += _ms(lambda: services.record_health("spark-local-replicate", "DEGRADED", "slow"), 1)
        flips += _ms(lambda: services.record_health("spark-local-replicate", "HEALTHY", "ok"), 1)
    figures["health flip commits (record_health)"] = statistics.median(flips)
    refresh.drain()
    # Every flow goes landing → lake → archive: a cheaper ingest moves them all.
    services.create_executor(
        {"name": "cheap-ingest", "technology": "spark-local", "spark_master": "local[2]", "cost": 1},
        capabilities=[("landing", "lake")],
    )
    started = time.perf_counter()
    moved = refresh.drain()
    elapsed = time.perf_counter() - started
    figures["background recompile, one scheduler"] = moved / elapsed
    figures["flows recompiled after adding a cheaper executor"] = moved
    # Every scheduler recompiles (SKIP LOCKED batches), as deployed for availability:
    # switching the cheap executor off moves every flow back, recompiled by two.
    services.set_enabled(SpecExecutor.objects.get(name="cheap-ingest"), False)
    connections.close_all()  # the forked schedulers open their own
    with multiprocessing.get_context("fork").Pool(2) as pool:
        started = time.perf_counter()
        moved = sum(pool.starmap(refresh.drain, [()] * 2))
        elapsed = time.perf_counter() - started
    figures["background recompile, 2 schedulers"] = moved / elapsed

    # Compiling alone (no writes): every flow, with a batch's shared loaders.
    snapshot = current_snapshot()
    batch = BatchTemplates()
    everyone = list(FlowConfig.objects.select_related("owner"))
    started = time.perf_counter()
    for one in everyone:
        compile_flow(
            one, topology=snapshot, loader=batch.loader_for(one.owner), access=batch.access_for(one.owner)
        )
    figures["compile only, every flow (no writes)"] = len(everyone) / (time.perf_counter() - started)

    flow = FlowConfig.objects.select_related("owner").order_by("pk").first()
    warm = BatchTemplates()
    loader, access = warm.loader_for(flow.owner), warm.access_for(flow.owner)
    compile_flow(flow, topology=snapshot, loader=loader, access=access)
    figures["one compile (demo flow, warm)"] = statistics.median(
        _ms(lambda: compile_flow(flow, topology=snapshot, loader=loader, access=access), 200)
    )
    figures["one compile (demo flow, cold loader, with its queries)"] = statistics.median(
        _ms(lambda: compile_flow(flow), 50)
    )

    # The /metrics figures over the whole history, recomputed in the background.
    from portal.monitoring.metrics import refresh_history_snapshot

    figures["metrics history snapshot (background, ms)"] = statistics.median(_ms(refresh_history_snapshot, 1))

    # Pages and API.
    client = Client()
    client.force_login(
        __import__("django.contrib.auth", fromlist=["get_user_model"])
        .get_user_model()
        .objects.get(username="admin")
    )
    execution = FlowExecution.objects.filter(flow=flow).order_by("-execution_id").first()
    state_pk = (
        __import__("portal.orchestration.models", fromlist=["DatasetState"])
        .DatasetState.objects.order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    pages = {
        "dashboard": "/monitoring/",
        "flows": "/flows/",
        "flows search": "/flows/?q=flow0004",
        "flow": f"/flows/{flow.flow_group}/{flow.flow_name}/",
        "executions": "/executions/",
        "executions of a flow": f"/executions/{flow.flow_group}/{flow.flow_name}/",
        "execution": f"/executions/{flow.flow_group}/{flow.flow_name}/{execution.execution_id}/",
        "watermarks": "/state/",
        "watermark": f"/state/{state_pk}/",
        "packs": "/packs/",
        "topology": "/topology/",
        "api flowconfigs": "/api/flowconfigs",
        "api flowexecutions": "/api/flowexecutions",
        "metrics": "/metrics",
    }
    for name, url in pages.items():
        response = client.get(url)
        if response.status_code != 200:
            figures[f"page {name} p95 (ms)"] = float("nan")
            print(f"  ! {url} answered {response.status_code}", file=sys.stderr)
            continue
        executed: list[str] = []

        def count(execute, sql, params, many, context, executed=executed):
            executed.append(sql)
            return execute(sql, params, many, context)

        # A wrapper, not CaptureQueriesContext: each request closes and reopens the connection.
        with connection.execute_wrapper(count):
            client.get(url)
        samples = _ms(lambda url=url: client.get(url), 12)
        figures[f"page {name} p95 (ms)"] = p95(samples)
        figures[f"page {name} queries"] = len(executed)

    # The scheduler: a pass when nothing is due (its fixed cost), then the
    # ticks of one top of the hour (every schedule but the daily one is due)
    # turned into executions by two scheduler processes at once. A scheduler
    # wakes for the earliest due tick (portal/orchestration/control/loop.py), so a
    # tick's lag is at most the loop's poll plus this burst.
    from django.conf import settings

    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    schedule_due_ticks(now=base - timedelta(minutes=1, seconds=30))  # first sight: next ticks
    figures["scheduler pass, nothing due"] = statistics.median(
        _ms(lambda: schedule_due_ticks(now=base - timedelta(minutes=1), reconcile=False), 5)
    )
    figures["scheduler reconciliation (once a minute, ms)"] = statistics.median(
        _ms(lambda: schedule_due_ticks(now=base - timedelta(minutes=1)), 3)
    )
    before = FlowExecution.objects.filter(trigger="SCHEDULE", scheduled_at=base).count()
    connections.close_all()  # the forked schedulers open their own
    context = multiprocessing.get_context("fork")
    schedulers = [
        context.Process(
            target=schedule_due_ticks, args=(base + timedelta(milliseconds=200),), kwargs={"reconcile": False}
        )
        for _ in range(2)
    ]
    started = time.perf_counter()
    for process in schedulers:
        process.start()
    for process in schedulers:
        process.join()
    burst = (time.perf_counter() - started) * 1000
    figures["scheduler: one minute's due ticks -> executions, 2 schedulers"] = burst
    figures["tick lag at that minute, worst (poll + burst, ms)"] = settings.ORCHESTRATOR_POLL_MILLIS + burst
    figures["ticks due at that minute"] = (
        FlowExecution.objects.filter(trigger="SCHEDULE", scheduled_at=base).count() - before
    )

    # Retention: prune what is older than 90 days.
    started = time.perf_counter()
    report = prune_history(budget_seconds=20, now=timezone.now())
    elapsed = time.perf_counter() - started
    pruned = report.executions + report.jobs + report.events + report.watermark_history
    figures["retention prune"] = pruned / elapsed if elapsed else 0.0
    figures["retention rows pruned in 20 s budget"] = pruned
    return figures


# --- driver ------------------------------------------------------------------------------


def one_size(args: argparse.Namespace) -> int:
    import psycopg

    admin_url = os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db_name}"')
    try:
        setup_django(args.db_name)
        info = generate(args.flows, args.jobs, args.events)
        figures = measure(args.flows)
        print(json.dumps({"info": info, "figures": figures}))
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')


def run_size(args: argparse.Namespace, divisor: int, db_name: str) -> dict:
    command = [
        sys.executable,
        __file__,
        "--one",
        "--flows",
        str(max(1, args.flows // divisor)),
        "--jobs",
        str(max(2, args.jobs // divisor)),
        "--events",
        str(max(1, args.events // divisor)),
        "--db-name",
        db_name,
    ] + (["--keep"] if args.keep else [])
    output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(output.stderr[-2000:])
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flows", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=5_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--db-name", default=f"flowport_bench_scale_{uuid.uuid4().hex[:6]}")
    parser.add_argument("--keep", action="store_true", help="keep the databases (to look at them)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one_size(args)
    small = run_size(args, 100, f"{args.db_name}_small")
    full = run_size(args, 1, args.db_name)
    print(
        f"catalog: {full['info']['flows']:,} flows, {full['info']['executions']:,} executions "
        f"({2 * full['info']['executions']:,} jobs), {args.events:,} events; generated in "
        f"{full['info']['generate_s']:.0f} s; beside it 1/100 of that"
    )
    print(f"{'figure':58} {'full':>10} {'1/100':>10} {'ratio':>7}  goal")
    failures = 0
    for name, value in full["figures"].items():
        small_value = small["figures"].get(name, float("nan"))
        ratio = value / small_value if small_value else float("nan")
        if name in GOALS:
            goal, unit, lower = GOALS[name]
        elif name.endswith("p95 (ms)"):
            goal, unit, lower = PAGE_GOAL_MS, "ms", True
        else:
            goal, unit, lower = None, "", True
        verdict = ""
        if goal is not None:
            met = value <= goal if lower else value >= goal
            failures += not met
            verdict = f"{'<=' if lower else '>='} {goal:g} {unit} {'ok' if met else 'MISSED'}"
        print(f"{name:58} {value:10.1f} {small_value:10.1f} {ratio:7.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
