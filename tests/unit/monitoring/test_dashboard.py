"""The home dashboard: every section renders from real rows, and the htmx
poll gets the live fragment only."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.events.services import raise_event
from portal.orchestration.models import Action, OutboxMessage, WorkerHeartbeat
from portal.topology.models import SpecExecutor
from tests.builders.executions import make_execution
from tests.unit.tables import assert_cells_name_their_columns, cells_by_label

pytestmark = pytest.mark.django_db
URL = reverse("monitoring:dashboard")


def _tile(html: str, status: str) -> tuple[int, int]:
    match = re.search(
        rf'<li class="stat {status}">.*?stat-value">(\d+)</span>.*?· (\d+) today', html, flags=re.S
    )
    assert match, f"no tile for {status}"
    return int(match.group(1)), int(match.group(2))


def test_counts_by_status_today_and_in_24_hours(signed_in, flow, settings):
    settings.TIME_ZONE = "UTC"
    now = timezone.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    make_execution(flow, status="COMMITTED", created=now - timedelta(minutes=1))
    make_execution(flow, status="COMMITTED", created=now - timedelta(minutes=2))
    make_execution(flow, status="FAILED", created=now - timedelta(minutes=3))
    # Before midnight but within 24 h: counts for 24 h only. In the last minutes before midnight
    # five minutes before the last midnight is more than 24 h ago: then an hour after it, today's.
    yesterday = max(midnight - timedelta(minutes=5), now - timedelta(hours=23))
    make_execution(flow, status="COMMITTED", created=yesterday)
    make_execution(flow, status="COMMITTED", created=now - timedelta(days=3))  # neither
    html = signed_in.get(URL).content.decode()
    day, today = _tile(html, "committed")
    assert day == 3
    assert today == (2 if yesterday < midnight else 3)
    assert _tile(html, "failed") == (1, 1)
    assert _tile(html, "skipped") == (0, 0)


def test_running_executions_show_progress_bars_and_indeterminate_ones(signed_in, flow):
    started = timezone.now() - timedelta(minutes=2)
    running = make_execution(
        flow,
        status="RUNNING",
        started=started,
        jobs=[
            {"status": "COMMITTED", "processed_count": 10},
            {
                "status": "RUNNING",
                "progress": {
                    "state": "RUNNING",
                    "fraction": 0.5,
                    "work_units_total": 2,
                    "work_units_done": 1,
                    "stages_total": 4,
                    "stages_completed": 2,
                    "tasks_total": 10,
                    "tasks_done": 5,
                },
            },
        ],
    )
    unknown = make_execution(
        flow_group="hr", flow_name="people", status="RUNNING", started=started, jobs=[{"status": "RUNNING"}]
    )
    not_planned = make_execution(
        flow_group="hr",
        flow_name="rooms",
        status="RUNNING",
        started=started,
        jobs=[
            {"status": "RUNNING", "progress": {"state": "UNKNOWN", "fraction": 0.0, "work_units_total": 0}}
        ],
    )
    waiting = make_execution(
        flow_group="hr", flow_name="badges", status="PENDING", message="Waiting for the topology: no path"
    )
    make_execution(flow, status="COMMITTED")
    html = signed_in.get(URL).content.decode()
    link = f'href="/executions/sales/orders/{running.execution_id}/"'
    assert link in html
    # (1 committed + 0.5) / 2 jobs = 75 %; the running job shows its own bar and Spark stages.
    assert f'value="75" aria-label="Progress of execution {running.execution_id}"' in html
    assert 'value="50" aria-label="Progress of job sales.orders.2-a-to-b"' in html
    assert "work units 1/2 · stages 2/4 · tasks 5/10" in html
    assert "1/2 jobs done" in html
    # No progress reported yet: a <progress> without value (indeterminate), labelled.
    for execution in (unknown, not_planned):
        assert (
            f'<progress aria-label="Progress of execution {execution.execution_id}: not reported yet">'
            in html
        )
    assert f"/executions/hr/badges/{waiting.execution_id}/" in html
    assert "Waiting for the topology: no path" in html
    assert 'Running now <span class="badge">4</span>' in html


def test_recent_failures_and_sla_breaches_with_their_messages(signed_in, flow):
    failed = make_execution(
        flow, status="FAILED", ended=timezone.now(), message="Job sales.orders.1 failed: disk full"
    )
    raise_event(
        "sla.job_start_missed",
        "sales.orders.1: did not start within its start deadline",
        flow_group="sales",
        flow_name="orders",
        execution_id=failed.execution_id,
    )
    raise_event("executor.degraded", "Executor local is degraded: no heartbeat", subject="local")
    html = signed_in.get(URL).content.decode()
    failures = html.split('id="dash-failures"')[1].split("</section>")[0]
    assert f"/executions/sales/orders/{failed.execution_id}/" in failures
    assert "disk full" in failures
    sla = html.split('id="dash-sla"')[1].split("</section>")[0]
    assert "sla.job_start_missed" in sla and "did not start within its start deadline" in sla
    assert "executor.degraded" not in sla
    assert "Executor local is degraded" in html.split('id="dash-events"')[1]


def test_executor_health_workers_and_backlog(signed_in, settings):
    now = timezone.now()
    SpecExecutor.objects.create(
        name="edge",
        uri="flowport://executors/edge",
        queue="executor.edge",
        health_status="DEGRADED",
        health_message="no worker heartbeat since the last check",
        last_heartbeat=now - timedelta(minutes=5),
    )
    WorkerHeartbeat.objects.create(
        worker="host-a:1", executors=["edge"], queues=["executor.edge"], started=now, last_seen=now
    )
    WorkerHeartbeat.objects.create(
        worker="host-b:2", executors=[], queues=["q"], started=now, last_seen=now - timedelta(hours=1)
    )
    OutboxMessage.objects.create(
        queue="q", task_name="t", kwargs={}, attempts=2, last_error="ConnectionError: refused"
    )
    OutboxMessage.objects.create(queue="q", task_name="t", kwargs={}, sent_at=now)
    Action.objects.create(
        flow_group="g", flow_name="n", execution_id=1, kind="REEVALUATE", due_at=now - timedelta(seconds=90)
    )
    html = signed_in.get(URL).content.decode()
    health = html.split('id="dash-health"')[1].split("</section>")[0]
    assert 'href="/topology/executors/edge/"' in health
    assert '<span class="badge degraded">degraded</span>' in health
    assert "no worker heartbeat since the last check" in health
    assert '<span class="badge degraded">late</span>' in health
    workers = html.split('id="dash-workers"')[1].split("</section>")[0]
    assert "host-a:1" in workers and "host-b:2" in workers
    assert workers.count(">alive<") == 1 and workers.count(">silent<") == 1
    backlog = html.split('id="dash-backlog"')[1].split("</section>")[0]
    assert "1 unsent" in backlog and "1 failed to send" in backlog and "ConnectionError: refused" in backlog
    assert re.search(r"<dd>1, oldest waiting 1m 3\ds</dd>", backlog)


def test_on_a_phone_each_worker_and_executor_cell_still_says_what_it_is(signed_in, executor):
    # The tables stack into one card per row there: the cell "0" alone would mean nothing.
    now = timezone.now()
    WorkerHeartbeat.objects.create(
        worker="vm:31815", queues=["executor.local"], running_jobs=0, started=now, last_seen=now
    )
    html = signed_in.get(URL).content.decode()
    assert_cells_name_their_columns(html)
    cells = cells_by_label(html)
    assert cells["Worker"] == ["vm:31815"] and cells["Running"] == ["0"]
    assert '<code class="ident">vm:31815</code>' in html  # an identifier: kept on one line
    assert cells["Executor"][0].startswith("local") and cells["Spark master"][0].startswith("local[*]")


def test_the_htmx_poll_gets_the_live_fragment_only(signed_in, flow):
    make_execution(flow, status="RUNNING", jobs=[{"status": "RUNNING"}])
    page = signed_in.get(URL)
    assert 'hx-get="/monitoring/"' in page.content.decode()
    assert "every 5s" in page.content.decode()
    poll = signed_in.get(URL, headers={"HX-Request": "true"})
    assert poll.status_code == 200
    body = poll.content.decode()
    assert "<html" not in body and 'id="dashboard-live"' not in body
    assert 'id="dash-running"' in body
    assert "HX-Request" in poll["Vary"]


def test_the_dashboard_answers_in_a_bounded_number_of_queries(signed_in, flow, django_assert_max_num_queries):
    for _ in range(8):
        make_execution(flow, status="RUNNING", jobs=[{"status": "RUNNING"}, {"status": "PENDING"}])
    with django_assert_max_num_queries(25):
        signed_in.get(URL, headers={"HX-Request": "true"})


def test_anonymous_users_are_sent_to_the_login_page(client):
    assert client.get(URL).status_code == 302
    poll = client.get(URL, headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/monitoring/"})
    assert poll.status_code == 200
    assert poll["HX-Redirect"].startswith("/login/?next=")


@pytest.mark.urls("tests.unit.monitoring.root_urlconf")
def test_metrics_at_the_root_and_the_dashboard_as_home_page(signed_in, flow):
    make_execution(flow, status="RUNNING", jobs=[{"status": "RUNNING"}])
    home = signed_in.get("/")
    assert home.status_code == 200 and 'id="dashboard-live"' in home.content.decode()
    assert reverse("home") == "/"
    metrics = signed_in.get("/metrics")
    assert metrics.status_code == 200 and b"flowport_flow_executions" in metrics.content
