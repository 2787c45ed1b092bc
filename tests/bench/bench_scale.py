"""The control plane at real size, on PostgreSQL, beside a steady load.

    .venv/bin/python tests/bench/bench_scale.py [--flows 100000] [--jobs 10000000] [--events 2000000]
        [--rounds 3] [--load-cores 1] [--load-pages 4]

Generates a catalog with bulk inserts (COPY, not the API): the demo topology
and template pack, `--flows` flows (copies of the demo flow with mixed cron
schedules, each compiled once), `--jobs` job executions (two hops per flow
execution, spread over 120 days), `--events` events and a watermark per
flow. It does this twice in the same run — at the full size and at 1/100 of
it, each in a throw-away database (`BENCH_DATABASE_ADMIN_URL`, default
postgres://postgres@127.0.0.1:5432/postgres; `--db-name` names them) — then
measures `--rounds` times, the two sizes in turn, and prints each figure's
median beside its goal and beside the same figure at 1/100: the ratio shows
how the cost grows with the data (1.0 = not at all).

A control plane shares its machine, so every measurement runs beside a
steady load the benchmark makes itself: `--load-cores` processes computing
without pause (as busy workers do) and one visitor asking for pages and API
lists `--load-pages` times a second (0 and 0: a quiet machine). The machine's
load average is printed beside the figures, and the database's size per
million executions.

Figures: a topology change (disable/enable an executor, a health flip) to
commit; the background recompile it causes (flows/s); one compile; each main
page and API list p95 and its query count; the scheduler's passes and the
ticks of a top of the hour written ahead of it (SCHEDULER_LOOKAHEAD_SECONDS):
the pass's time against the window, ticks late, lag p99 and worst; a pass of the /metrics
history figures; history retention (rows/s). Benchmarks are not tests.
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
    "tick lag at that minute, p99 (ms)": (2000.0, "ms", True),
    "ticks written late (after their time)": (0.0, "ticks", True),
    "ahead-of-time pass / look-ahead window (%)": (50.0, "%", True),
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
    elapsed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        size = cursor.fetchone()[0]
    return {"generate_s": elapsed, "flows": len(flow_rows), "executions": executions, "db_bytes": size}


# --- measurements ------------------------------------------------------------------------


def _ms(func, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        func()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def p95(samples: list[float]) -> float:
    return percentile(samples, 0.95)


def _admin_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def _page_urls() -> dict[str, str]:
    from portal.flows.models import FlowConfig
    from portal.orchestration.models import DatasetState, FlowExecution

    flow = FlowConfig.objects.order_by("pk").first()
    execution = FlowExecution.objects.filter(flow=flow).order_by("-execution_id").first()
    state_pk = DatasetState.objects.order_by("pk").values_list("pk", flat=True).first()
    return {
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


# --- the background load -----------------------------------------------------------------


def _compute(stop) -> None:
    """A busy worker: one core, all the time."""
    while not stop.is_set():
        sum(i * i for i in range(20_000))


def _visit(stop, urls: list[str], per_second: float) -> None:
    """A visitor on the portal: pages and API lists, `per_second` of them, round and round."""
    from django.db import connections

    connections.close_all()  # its own connection, not the parent's
    client = _admin_client()
    pause = 1.0 / per_second
    while not stop.is_set():
        for url in urls:
            if stop.is_set():
                break
            started = time.monotonic()
            client.get(url)
            stop.wait(max(0.0, pause - (time.monotonic() - started)))


def start_load(cores: int, pages_per_second: float, urls: list[str]):
    from django.db import connections

    connections.close_all()  # the forked processes open their own
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    processes = [context.Process(target=_compute, args=(stop,), daemon=True) for _ in range(cores)]
    if pages_per_second > 0:
        processes.append(context.Process(target=_visit, args=(stop, urls, pages_per_second), daemon=True))
    for process in processes:
        process.start()
    return stop, processes


def stop_load(load) -> None:
    stop, processes = load
    stop.set()
    for process in processes:
        process.join(timeout=30)
        if process.is_alive():
            process.terminate()


# --- one round of figures ----------------------------------------------------------------


def _recompiles(figures: dict) -> None:
    from django.db import connections

    from portal.flows import refresh
    from portal.topology import services
    from portal.topology.models import SpecExecutor

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
    cheap = SpecExecutor.objects.filter(name="cheap-ingest").first()
    if cheap is None:
        services.create_executor(
            {"name": "cheap-ingest", "technology": "spark-local", "spark_master": "local[2]", "cost": 1},
            capabilities=[("landing", "lake")],
        )
    else:  # a later round: it is there, switched off
        services.set_enabled(cheap, True)
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


def _compiles(figures: dict) -> None:
    from portal.flows.compiler import compile_flow
    from portal.flows.compiler.templates import BatchTemplates
    from portal.flows.models import FlowConfig
    from portal.topology.graph import current_snapshot

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


def _pages(figures: dict, urls: dict[str, str]) -> None:
    from django.db import connection

    client = _admin_client()
    for name, url in urls.items():
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
        samples = _ms(lambda url=url: client.get(url), 20)
        figures[f"page {name} p95 (ms)"] = p95(samples)
        figures[f"page {name} queries"] = len(executed)


def _ticks(figures: dict, round_no: int) -> None:
    """A pass when nothing is due (its fixed cost), then the ticks of one top
    of the hour (every schedule but the daily one is due) written ahead by two
    scheduler processes at once, as the loop does: it wakes a look-ahead
    (SCHEDULER_LOOKAHEAD_SECONDS) before the earliest unwritten tick, so the
    pass runs on the scheduler's clock from `base - lookahead` and each tick's
    execution and LAUNCH (due at the tick) must commit before `base`. The
    ticks committed are counted every 50 ms while the schedulers run: those
    committed later than the look-ahead are late. A tick's lag is then the
    orchestrator's poll plus the claim query finding its LAUNCH at the tick,
    plus, for a late tick, how late it was committed; the p99 is over the ticks."""
    from django.conf import settings
    from django.db import connections
    from django.utils import timezone

    from portal.orchestration.control.scheduler import schedule_due_ticks
    from portal.orchestration.models import Action, FlowExecution

    lookahead = float(settings.SCHEDULER_LOOKAHEAD_SECONDS)
    # Each round its own hour, after the previous round's.
    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1 + round_no)
    before_window = base - timedelta(seconds=lookahead + 90)
    for _ in range(50):  # first sight: the ticks since the last round are missed ticks, skipped
        report = schedule_due_ticks(now=before_window, lookahead=0)
        if not report.created and not report.missed_skipped:
            break
    quiet = before_window + timedelta(seconds=30)
    figures["scheduler pass, nothing due"] = statistics.median(
        _ms(lambda: schedule_due_ticks(now=quiet, reconcile=False, lookahead=0), 5)
    )
    # The loop reconciles the cursors one slice of the catalog at a time (every 5 s).
    figures["scheduler pass with a reconciliation slice (ms)"] = statistics.median(
        _ms(lambda: schedule_due_ticks(now=quiet, reconcile=0, lookahead=0), 3)
    )
    # Up to the window: the minutely flows' earlier ticks, not measured.
    schedule_due_ticks(now=base - timedelta(seconds=lookahead + 1), reconcile=False, lookahead=0)
    at_base = FlowExecution.with_upcoming.filter(trigger="SCHEDULE", scheduled_at=base)
    before = at_base.count()
    connections.close_all()  # the forked schedulers open their own
    context = multiprocessing.get_context("fork")
    wake = base - timedelta(seconds=lookahead)
    schedulers = [
        context.Process(
            target=schedule_due_ticks, args=(wake,), kwargs={"reconcile": False, "lookahead": lookahead}
        )
        for _ in range(2)
    ]
    started = time.perf_counter()
    for process in schedulers:
        process.start()
    committed: list[tuple[float, int]] = []
    while any(process.is_alive() for process in schedulers):
        committed.append(((time.perf_counter() - started) * 1000, at_base.count() - before))
        time.sleep(0.05)
    for process in schedulers:
        process.join()
    burst = (time.perf_counter() - started) * 1000
    due = at_base.count() - before
    committed.append((burst, due))
    window_ms = lookahead * 1000
    on_time = max((done for at, done in committed if at <= window_ms), default=0)
    launches = Action.objects.filter(kind="LAUNCH", done_at__isnull=True, due_at=base).count()
    # At the tick: the orchestrator's claim query finds the first LAUNCHes among them.
    claimable = Action.objects.filter(done_at__isnull=True, due_at__lte=base).order_by("due_at", "id")
    claim = statistics.median(_ms(lambda: list(claimable.values_list("id", flat=True)[:50]), 5))
    poll = settings.ORCHESTRATOR_POLL_MILLIS
    p99_at = next(at for at, done in committed if done >= 0.99 * due) if due else 0.0
    figures["look-ahead window (s)"] = lookahead
    figures["ahead-of-time pass, 2 schedulers (ms)"] = burst
    figures["ahead-of-time pass / look-ahead window (%)"] = 100 * burst / window_ms
    figures["ticks due at that minute"] = due
    figures["ticks written ahead of their time"] = on_time
    figures["ticks written late (after their time)"] = due - on_time
    figures["LAUNCH actions due at that minute"] = launches
    figures["claim query at the tick (ms)"] = claim
    figures["tick lag at that minute, p99 (ms)"] = poll + claim + max(0.0, p99_at - window_ms)
    figures["tick lag at that minute, worst (ms)"] = poll + claim + max(0.0, burst - window_ms)


def _retention(figures: dict) -> None:
    from django.utils import timezone

    from portal.orchestration.state.retention import prune_history

    # Prune what is older than 90 days (a quarter of the history).
    started = time.perf_counter()
    report = prune_history(budget_seconds=20, now=timezone.now())
    elapsed = time.perf_counter() - started
    pruned = report.executions + report.jobs + report.events + report.watermark_history
    figures["retention prune"] = pruned / elapsed if elapsed else 0.0
    figures["retention rows pruned in 20 s budget"] = pruned


def measure(args: argparse.Namespace) -> dict:
    from portal.flows import refresh
    from portal.monitoring.history_counts import refresh_history_snapshot

    figures: dict[str, float] = {}
    urls = _page_urls()
    load = start_load(args.load_cores, args.load_pages, list(urls.values()))
    try:
        time.sleep(2)  # the load settles
        figures["load average at the start (1 min)"] = os.getloadavg()[0]
        if args.round == 0:
            # First compile of every flow, as after an upgrade: the planner queues all.
            started = time.perf_counter()
            refresh.drain()
            figures["initial compile of the catalog (s)"] = time.perf_counter() - started
        _recompiles(figures)
        _compiles(figures)
        # The /metrics figures over the whole history: one bounded pass (monitoring.history_counts).
        figures["metrics history pass (background, ms)"] = statistics.median(_ms(refresh_history_snapshot, 3))
        _pages(figures, urls)
        _ticks(figures, args.round)
        _retention(figures)
        figures["load average at the end (1 min)"] = os.getloadavg()[0]
    finally:
        stop_load(load)
    return figures


# --- driver ------------------------------------------------------------------------------


def _admin_url() -> str:
    return os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def _drop(db_name: str) -> None:
    import psycopg

    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def one_step(args: argparse.Namespace) -> int:
    """In its own process: generate one size's database, or measure it once."""
    import psycopg

    if args.step == "generate":
        with psycopg.connect(_admin_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{args.db_name}"')
    try:
        setup_django(args.db_name)
        if args.step == "generate":
            result = {"info": generate(args.flows, args.jobs, args.events)}
        else:
            result = {"figures": measure(args)}
        print(json.dumps(result))
        return 0
    finally:
        from django.db import connections

        connections.close_all()


def run_step(args: argparse.Namespace, step: str, divisor: int, db_name: str, round_no: int = 0) -> dict:
    command = [
        sys.executable,
        __file__,
        "--step",
        step,
        "--round",
        str(round_no),
        "--flows",
        str(max(1, args.flows // divisor)),
        "--jobs",
        str(max(2, args.jobs // divisor)),
        "--events",
        str(max(1, args.events // divisor)),
        "--load-cores",
        str(args.load_cores),
        "--load-pages",
        str(args.load_pages),
        "--db-name",
        db_name,
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(output.stderr[-2000:])
    return json.loads(output.stdout.strip().splitlines()[-1])


def _verdict(name: str, value: float) -> tuple[str, bool]:
    if name in GOALS:
        goal, unit, lower = GOALS[name]
    elif name.endswith("p95 (ms)"):
        goal, unit, lower = PAGE_GOAL_MS, "ms", True
    else:
        return "", True
    met = value <= goal if lower else value >= goal
    return f"{'<=' if lower else '>='} {goal:g} {unit} {'ok' if met else 'MISSED'}", met


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flows", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each size (medians)")
    parser.add_argument("--load-cores", type=int, default=1, help="processes computing beside (0: none)")
    parser.add_argument("--load-pages", type=float, default=4.0, help="pages a second asked beside (0: none)")
    parser.add_argument("--db-name", default=f"flowport_bench_scale_{uuid.uuid4().hex[:6]}")
    parser.add_argument("--keep", action="store_true", help="keep the databases (to look at them)")
    parser.add_argument("--step", choices=["generate", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        return one_step(args)
    sizes = {"full": (1, args.db_name), "1/100": (100, f"{args.db_name}_small")}
    try:
        info = {label: run_step(args, "generate", d, db)["info"] for label, (d, db) in sizes.items()}
        runs: dict[str, list[dict]] = {label: [] for label in sizes}
        for round_no in range(args.rounds):  # the sizes in turn, so both see the same machine
            for label, (divisor, db_name) in sizes.items():
                runs[label].append(run_step(args, "measure", divisor, db_name, round_no)["figures"])
                # Each round's figures as they come, so an interrupted run still shows them.
                figures = json.dumps(runs[label][-1])
                print(f"round {round_no + 1} {label}: done {figures}", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            for _divisor, db_name in sizes.values():
                _drop(db_name)
    full = info["full"]
    size_gb = full["db_bytes"] / 1e9
    print(
        f"catalog: {full['flows']:,} flows, {full['executions']:,} executions "
        f"({2 * full['executions']:,} jobs), {args.events:,} events; generated in "
        f"{full['generate_s']:.0f} s; beside it 1/100 of that; {args.rounds} rounds, medians; "
        f"beside a load of {args.load_cores} busy core(s) and {args.load_pages:g} pages/s"
    )
    print(
        f"database after generation: {size_gb:.2f} GB, {size_gb / (full['executions'] / 1e6):.2f} GB per "
        f"million flow executions, {size_gb / (2 * full['executions'] / 1e6):.2f} GB per million job "
        f"executions (goal <= 1 GB per million executions)"
    )
    print(f"{'figure':62} {'full':>9} {'runs':>24} {'1/100':>9} {'ratio':>7}  goal")
    names = list(dict.fromkeys(name for run in runs["full"] for name in run))
    for name in names:
        values = [run[name] for run in runs["full"] if name in run]
        small = [run[name] for run in runs["1/100"] if name in run]
        value = statistics.median(values)
        small_value = statistics.median(small) if small else float("nan")
        ratio = value / small_value if small_value else float("nan")
        verdict, _met = _verdict(name, value)
        spread = " ".join(f"{v:.1f}" for v in values)
        print(f"{name[:62]:62} {value:9.1f} {spread:>24} {small_value:9.1f} {ratio:7.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
