"""Stories of people watching executions in the browser: the list, an
execution's page with its job DAG, the buttons, the htmx polling that runs
only while something is unfinished, and one flow's executions fragment."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone

from portal.orchestration.control.actions import enqueue_for, process_actions
from portal.orchestration.models import Action, ActionKind, FlowExecution
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import T0, FlowExecutionFactory, JobExecutionFactory, two_hop_flow
from tests.unit.tables import assert_cells_name_their_columns, cells_by_label

pytestmark = pytest.mark.django_db

POLL = 'hx-trigger="every 2s"'
HTMX = {"HX-Request": "true"}


def browser_for(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def browser(owner):
    return browser_for(owner)


@pytest.fixture
def flow(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)


@pytest.fixture
def running(flow):
    execution = FlowExecutionFactory(flow=flow, started_at=T0)
    JobExecutionFactory(
        execution=execution,
        job_name="sales.orders.1-a-to-b",
        hop_index=1,
        executor="x1",
        status="COMMITTED",
        started_at=T0,
        ended_at=T0 + timedelta(minutes=1),
        processed_count=120,
        records_read=130,
        records_rejected=10,
        low_watermark="100",
        high_watermark="220",
        message="1 task(s), 120 record(s) delivered (130 read, 10 rejected).",
        log_excerpt="2026-03-01T12:00:01Z task 0 orders SUCCEEDED: 120 extracted <b>\n",
    )
    JobExecutionFactory(
        execution=execution,
        job_name="sales.orders.2-b-to-c",
        hop_index=2,
        executor="x2",
        parents=["sales.orders.1-a-to-b"],
        status="RUNNING",
        attempt=2,
        retries=1,
        max_retries=3,
        started_at=T0 + timedelta(minutes=2),
        spark_ui_url="http://127.0.0.1:4040",
        progress={
            "state": "RUNNING",
            "fraction": 0.75,
            "work_units_total": 1,
            "tasks_total": 4,
            "tasks_done": 3,
        },
    )
    return execution


def page_url(execution: FlowExecution) -> str:
    return f"/executions/{execution.flow_group}/{execution.flow_name}/{execution.execution_id}/"


def buttons(html: str) -> set[str]:
    return set(re.findall(r'<button type="submit"[^>]*>([^<]+)</button>', html)) - {"Log out"}


PAGES = [
    "/executions/",
    "/executions/sales/orders/{id}/",
    "/executions/sales/orders/",
    "/executions/sales/orders/{id}/jobs/sales.orders.1-a-to-b/log/",
]


@pytest.mark.parametrize("url", PAGES)
def test_visitors_are_sent_to_log_in(client, running, url):
    response = client.get(url.format(id=running.execution_id))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("who", ["owner", "outsider", "staff"])
def test_everyone_signed_in_sees_a_visible_flows_executions(request, running, url, who):
    page = browser_for(request.getfixturevalue(who)).get(url.format(id=running.execution_id))
    assert page.status_code == 200
    assert b"<html" in page.content


# --- the list -------------------------------------------------------------------------


def test_the_list_shows_recent_executions_and_filters_them(browser, owner, flow):
    other = FlowConfigFactory(flow_group="hr", flow_name="people", owner=owner)
    failed = FlowExecutionFactory(flow=flow, status="FAILED", message="Job x failed: boom")
    FlowExecutionFactory(flow=other, status="COMMITTED")
    page = browser.get("/executions/").content.decode()
    assert "sales/orders" in page and "hr/people" in page
    assert page_url(failed) in page and "Job x failed: boom" in page

    fragment = browser.get("/executions/?status=FAILED", headers=HTMX)
    assert b"<html" not in fragment.content
    assert "HX-Request" in fragment["Vary"]
    assert b"sales/orders" in fragment.content and b"hr/people" not in fragment.content
    by_flow = browser.get("/executions/?flowGroup=hr&flowName=people").content.decode()
    assert "hr/people" in by_flow and page_url(failed) not in by_flow


def test_the_list_filters_by_time_with_local_date_time_inputs(browser, flow, settings):
    settings.TIME_ZONE = "Europe/Paris"
    early = FlowExecutionFactory(flow=flow, execution_id=int(T0.timestamp() * 1000), status="COMMITTED")
    late = FlowExecutionFactory(flow=flow, execution_id=int(T0.timestamp() * 1000) + 7_200_000)
    # 13:30 in Paris is 12:30 UTC: after the early run (12:00 UTC), before the late one (14:00 UTC).
    page = browser.get("/executions/?since=2026-03-01T13:30").content.decode()
    assert page_url(late) in page and page_url(early) not in page
    assert 'name="since" id="id_since" value="2026-03-01T13:30"' in page
    by_millis = browser.get(f"/executions/?until={early.execution_id}").content.decode()
    assert page_url(early) in by_millis and page_url(late) not in by_millis
    assert 'name="until" id="id_until" value="2026-03-01T13:00"' in by_millis


def test_on_a_phone_each_filter_keeps_its_label_and_each_cell_its_column(browser, flow, settings):
    settings.TIME_ZONE = "UTC"
    FlowExecutionFactory(flow=flow, execution_id=int(T0.timestamp() * 1000), status="COMMITTED")
    FlowExecutionFactory(flow=flow, execution_id=int(T0.timestamp() * 1000) + 60_000, status="RUNNING")
    html = browser.get("/executions/").content.decode()
    # The filters wrap as whole label-and-input pairs, never a label away from its input.
    for name in ("flowGroup", "flowName", "status", "since", "until"):
        assert re.search(
            rf'<div class="filter">\s*<label for="id_{name}">\w+</label>\s*<(input|select)[^>]* id="id_{name}"',
            html,
        ), name
    # The table stacks into cards: each cell says which column it is.
    assert_cells_name_their_columns(html)
    cells = cells_by_label(html)
    assert cells["Started"] == ["2026-03-01 12:01:00", "2026-03-01 12:00:00"]
    assert cells["Ended"] == ["—", "2026-03-01 12:05:00"]
    # So does one flow's list of executions.
    assert_cells_name_their_columns(browser.get("/executions/sales/orders/", headers=HTMX).content)


def test_a_bad_filter_is_shown_not_a_crash(browser, flow):
    response = browser.get("/executions/?since=yesterday")
    assert response.status_code == 400
    assert b"since" in response.content and b"ISO 8601" in response.content


def test_the_list_polls_only_while_an_execution_on_it_is_unfinished(browser, flow):
    execution = FlowExecutionFactory(flow=flow, status="RUNNING")
    assert POLL in browser.get("/executions/").content.decode()
    fragment = browser.get("/executions/?flowGroup=sales", headers=HTMX).content.decode()
    assert POLL in fragment and 'hx-get="/executions/?flowGroup=sales"' in fragment
    execution.status, execution.ended_at = "COMMITTED", T0
    execution.save()
    done = browser.get("/executions/?flowGroup=sales", headers=HTMX).content.decode()
    assert POLL not in done and "hx-get" not in done.split("<table")[0]


# --- an execution's page -----------------------------------------------------------------


def test_the_execution_page_shows_the_job_dag_by_hop(browser, running):
    page = browser.get(page_url(running)).content.decode()
    assert "Hop 1" in page and "Hop 2" in page
    assert page.index("sales.orders.1-a-to-b") < page.index("Hop 2")
    # parents → children, both ways
    assert 'then <a href="#job-salesorders1-a-to-b' not in page
    assert 'then <a href="#job-salesorders2-b-to-c">sales.orders.2-b-to-c</a>' in page
    assert 'after <a href="#job-salesorders1-a-to-b">sales.orders.1-a-to-b</a>' in page
    # each job's facts
    assert "x1" in page and "x2" in page
    assert "(1 of 3 retries used)" in page
    assert '<dt>Delivered</dt><dd>120 records <small class="muted">(130 read, 10 rejected)</small>' in page
    assert "<code>100</code> → <code>220</code>" in page
    assert '<progress max="100" value="75"' in page  # the heartbeat's fraction
    assert '<progress max="100" value="100"' in page  # committed
    assert "127.0.0.1:4040" not in page  # the Spark UI: staff only, through the portal
    assert (
        '<pre class="log" tabindex="0">2026-03-01T12:00:01Z task 0 orders SUCCEEDED: 120 extracted &lt;b&gt;'
        in page
    )
    assert "1 task(s), 120 record(s) delivered (130 read, 10 rejected)." in page


def test_the_page_polls_while_running_and_the_last_refresh_stops_it(browser, running):
    page = browser.get(page_url(running)).content.decode()
    assert POLL in page
    assert f'hx-get="{page_url(running)}"' in page
    fragment = browser.get(page_url(running), headers=HTMX)
    assert b"<html" not in fragment.content and POLL in fragment.content.decode()
    assert "HX-Request" in fragment["Vary"]
    running.status, running.ended_at, running.message = "COMMITTED", T0 + timedelta(minutes=9), "done"
    running.save()
    last = browser.get(page_url(running), headers=HTMX).content.decode()
    assert last.startswith('<div id="execution-status"') or 'id="execution-status"' in last
    assert POLL not in last and "hx-get" not in last
    assert "COMMITTED" in last


def test_a_short_run_says_how_many_seconds_it_took(browser, flow):
    quick = FlowExecutionFactory(
        flow=flow, status="COMMITTED", started_at=T0, ended_at=T0 + timedelta(seconds=23)
    )
    page = browser.get(page_url(quick)).content.decode()
    assert "(took 23s)" in page


def test_a_pending_execution_says_its_jobs_come_with_the_launch(browser, flow):
    pending = FlowExecutionFactory(flow=flow, status="PENDING", started_at=None)
    page = browser.get(page_url(pending)).content.decode()
    assert "No jobs yet" in page and POLL in page


def test_an_unsafe_spark_ui_address_is_not_a_link(browser, running):
    job = running.jobs.get(hop_index=2)
    job.spark_ui_url = "javascript:alert(1)"
    job.save()
    assert "javascript:alert" not in browser.get(page_url(running)).content.decode()


@pytest.mark.parametrize(
    ("status", "owner_sees"),
    [
        ("RUNNING", {"Run now", "Kill"}),
        ("COMPILED", {"Run now", "Kill"}),
        ("FAILED", {"Run now", "Resume"}),
        ("CANCELLED", {"Run now", "Resume"}),
        ("COMMITTED", {"Run now"}),
        ("SKIPPED", {"Run now"}),
    ],
)
def test_buttons_appear_only_when_allowed(owner, outsider, staff, flow, status, owner_sees):
    execution = FlowExecutionFactory(flow=flow, status=status)
    job_status = {"FAILED": "FAILED", "CANCELLED": "CANCELLED"}.get(status, "COMMITTED")
    JobExecutionFactory(execution=execution, status=job_status)
    assert buttons(browser_for(owner).get(page_url(execution)).content.decode()) == owner_sees
    assert buttons(browser_for(staff).get(page_url(execution)).content.decode()) == owner_sees
    assert buttons(browser_for(outsider).get(page_url(execution)).content.decode()) == set()


def test_an_execution_that_failed_before_its_jobs_existed_offers_no_resume(browser, flow):
    """E.g. "Compilation failed": the orchestrator would have nothing to resume."""
    failed = FlowExecutionFactory(flow=flow, status="FAILED", message="Compilation failed: no path")
    assert buttons(browser.get(page_url(failed)).content.decode()) == {"Run now"}
    response = browser.post(page_url(failed) + "resume/", follow=True)
    assert b"run the flow again instead" in response.content
    assert not Action.objects.exists()


def test_a_requested_kill_hides_the_kill_button_until_it_is_handled(browser, running):
    enqueue_for(running, ActionKind.KILL, payload={"by": "olivia"})
    page = browser.get(page_url(running)).content.decode()
    assert "Kill" not in buttons(page)
    assert "Waiting for the orchestrator to handle: KILL" in page


def test_a_deleted_flows_execution_is_hidden_from_users_and_shown_to_staff(browser, staff):
    gone = FlowExecutionFactory(flow=None, flow_group="sales", flow_name="gone", status="FAILED")
    JobExecutionFactory(execution=gone, status="FAILED")
    assert browser.get(page_url(gone)).status_code == 404
    page = browser_for(staff).get(page_url(gone)).content.decode()
    assert "The flow was deleted" in page
    assert buttons(page) == {"Resume"}  # no flow left to run again


def test_an_unknown_execution_is_404(browser, flow):
    assert browser.get("/executions/sales/orders/123/").status_code == 404
    assert browser.get("/executions/sales/orders/99999999999999999999999/").status_code == 404


# --- buttons do things ---------------------------------------------------------------------------


def test_the_buttons_post_with_csrf(owner, running):
    strict = browser_for(owner, enforce_csrf_checks=True)
    page = strict.get(page_url(running)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert strict.post(page_url(running) + "kill/").status_code == 403  # no token
    assert not Action.objects.filter(kind=ActionKind.KILL).exists()
    response = strict.post(page_url(running) + "kill/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302


def test_kill_from_the_page_cancels_the_execution(browser, owner, running):
    response = browser.post(page_url(running) + "kill/", follow=True)
    assert response.redirect_chain[-1][0] == page_url(running)
    assert b"Kill of execution" in response.content
    assert Action.objects.filter(kind=ActionKind.KILL, execution_id=running.execution_id).count() == 1
    process_actions()
    running.refresh_from_db()
    assert running.cancel_requested and running.message == f"Killed by {owner.username}."
    assert "<dt>Kill</dt><dd>asked for; its jobs stop within seconds</dd>" in (
        browser.get(page_url(running)).content.decode()
    )


def test_a_kill_that_came_too_late_is_explained(browser, flow):
    done = FlowExecutionFactory(flow=flow, status="COMMITTED")
    response = browser.post(page_url(done) + "kill/", follow=True)
    assert b"is already COMMITTED" in response.content
    assert not Action.objects.exists()


def test_resume_from_the_page(browser, flow):
    failed = FlowExecutionFactory(flow=flow, status="FAILED")
    JobExecutionFactory(execution=failed, job_name="a", status="FAILED", spec={"properties": {}})
    response = browser.post(page_url(failed) + "resume/")
    assert response.status_code == 302
    process_actions()
    failed.refresh_from_db()
    assert failed.status == "RUNNING"
    assert failed.jobs.get().attempt == 2


def test_htmx_posts_are_answered_with_a_client_redirect(browser, running):
    response = browser.post(page_url(running) + "kill/", headers=HTMX)
    assert response["HX-Redirect"] == page_url(running)


def test_run_now_from_the_page_launches_the_flow(browser, owner):
    two_hop_flow(owner)
    response = browser.post("/executions/demo/a-to-c/run/")
    execution = FlowExecution.objects.get()
    assert response.status_code == 302 and response["Location"] == page_url(execution)
    assert execution.trigger == "RUN_NOW" and execution.requested_by == owner.username
    process_actions()
    page = browser.get(page_url(execution)).content.decode()
    assert "demo.a-to-c.1-a-to-b" in page and "demo.a-to-c.2-b-to-c" in page
    assert "ORCHESTRATED" in page and POLL in page


@pytest.mark.parametrize(
    "url",
    [
        "/executions/sales/orders/{id}/kill/",
        "/executions/sales/orders/{id}/resume/",
        "/executions/sales/orders/run/",
    ],
)
def test_outsiders_cannot_press_the_buttons_and_gets_are_refused(outsider, owner, running, url):
    url = url.format(id=running.execution_id)
    assert browser_for(outsider).post(url).status_code == 403
    assert browser_for(owner).get(url).status_code == 405
    assert not Action.objects.filter(kind__in=["KILL", "RESUME"]).exists()
    assert FlowExecution.objects.count() == 1


# --- one flow's executions -----------------------------------------------------------------


def test_the_flow_page_fragment_loads_itself_from_the_orchestration_app(flow, rf, owner):
    """What the flow page gets from `{% include "orchestration/_flow_executions.html" %}`."""
    request = rf.get("/flows/sales/orders/")
    request.user = owner
    html = render_to_string("orchestration/_flow_executions.html", {"flow": flow}, request=request)
    assert 'hx-get="/executions/sales/orders/"' in html
    assert 'hx-trigger="load"' in html and POLL not in html


def test_the_flow_fragment_lists_its_executions_and_polls_while_one_runs(browser, owner, flow, running):
    other = FlowConfigFactory(flow_group="hr", flow_name="people", owner=owner)
    elsewhere = FlowExecutionFactory(flow=other)
    fragment = browser.get("/executions/sales/orders/", headers=HTMX)
    html = fragment.content.decode()
    assert b"<html" not in fragment.content and "HX-Request" in fragment["Vary"]
    assert page_url(running) in html and page_url(elsewhere) not in html
    assert POLL in html and "Run now" in buttons(html)
    running.status, running.ended_at = "FAILED", T0
    running.save()
    html = browser.get("/executions/sales/orders/", headers=HTMX).content.decode()
    assert POLL not in html and "hx-get" not in html
    assert "/executions/?flowGroup=sales&amp;flowName=orders" in html


def test_the_flow_fragment_offers_run_now_only_to_who_may_run(outsider, flow):
    html = browser_for(outsider).get("/executions/sales/orders/", headers=HTMX).content.decode()
    assert buttons(html) == set() and "No executions yet" in html
    assert browser_for(outsider).get("/executions/sales/nope/").status_code == 404


# --- admin --------------------------------------------------------------------------------


def test_staff_can_look_at_orchestration_rows_in_the_admin(client, running):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    enqueue_for(running, ActionKind.REEVALUATE)
    for model in (
        "flowexecution",
        "jobexecution",
        "action",
        "outboxmessage",
        "schedulecursor",
        "workerheartbeat",
        "datasetstate",
    ):
        assert client.get(f"/admin/orchestration/{model}/").status_code == 200, model
    assert client.get(f"/admin/orchestration/flowexecution/{running.pk}/change/").status_code == 200
    assert client.get("/admin/orchestration/flowexecution/add/").status_code == 403


def test_kill_asks_first(browser, running):
    """The Kill button sits behind a disclosure that says what killing does."""
    page = browser.get(page_url(running)).content.decode()
    confirm = page[page.index('<details class="confirm" id="kill-confirm">') :]
    confirm = confirm[: confirm.index("</details>")]
    assert "<summary" in confirm and "Kill…" in confirm
    # Ids: htmx gives the focus back to them after a refresh (js/live.js skips refreshes
    # while the confirmation is open).
    assert '<summary class="button danger" id="kill-open">Kill…</summary>' in confirm
    assert '<button type="submit" class="danger" id="kill-submit">Kill</button>' in confirm
    assert "Hops that already committed stay published" in confirm


def test_run_now_while_a_run_is_unfinished_says_the_new_one_will_be_skipped(browser, running):
    response = browser.post("/executions/sales/orders/run/", follow=True)
    page = response.content.decode()
    assert f"Execution {running.execution_id} of this flow is still running" in page
    assert "will be skipped" in page and "started." not in page


def test_after_resume_the_page_refreshes_until_the_orchestrator_takes_it(browser, flow):
    """Resumed from the page: the execution is still FAILED until the
    orchestrator handles the request, so the page keeps polling and shows the
    new state by itself."""
    failed = FlowExecutionFactory(flow=flow, status="FAILED")
    JobExecutionFactory(execution=failed, job_name="a", status="FAILED", spec={"properties": {}})
    assert POLL not in browser.get(page_url(failed)).content.decode()
    browser.post(page_url(failed) + "resume/")
    waiting = browser.get(page_url(failed), headers=HTMX).content.decode()
    assert POLL in waiting and "Waiting for the orchestrator to handle: RESUME" in waiting
    process_actions()
    resumed = browser.get(page_url(failed), headers=HTMX).content.decode()
    assert POLL in resumed and "RUNNING" in resumed


def test_the_page_says_what_each_destination_received_with_thousands_separators(browser, flow):
    done = FlowExecutionFactory(flow=flow, status="COMMITTED")
    for hop, parents in ((1, []), (2, ["sales.orders.1-landing-to-lake"])):
        target = "lake" if hop == 1 else "archive"
        JobExecutionFactory(
            execution=done,
            job_name=f"sales.orders.{hop}-{'landing' if hop == 1 else 'lake'}-to-{target}",
            hop_index=hop,
            parents=parents,
            status="COMMITTED",
            processed_count=3_000_000,
            spec={"properties": {"flowport.hop.destination": target}},
        )
    page = browser.get(page_url(done)).content.decode()
    assert "<dt>Delivered</dt><dd>3,000,000 records to archive</dd>" in page
    assert "3,000,000 records</dd>" in page and "6,000,000" not in page


def test_a_kill_asked_of_a_run_that_then_ended_says_how_it_ended(browser, flow):
    ended = FlowExecutionFactory(flow=flow, status="FAILED", cancel_requested=True, ended_at=timezone.now())
    page = browser.get(page_url(ended)).content.decode()
    assert "<dt>Kill</dt><dd>asked for; the run ended failed</dd>" in page


def test_a_files_watermark_reads_as_the_newest_files_time_and_name(browser, flow):
    execution = FlowExecutionFactory(flow=flow, status="COMMITTED", ended_at=timezone.now())
    JobExecutionFactory(
        execution=execution,
        job_name="ingest",
        status="COMMITTED",
        low_watermark="",
        high_watermark="001796348793911:part-00001-abc.snappy.parquet",
        spec={"properties": {}},
    )
    page = browser.get(page_url(execution)).content.decode()
    shown = 'title="001796348793911:part-00001-abc.snappy.parquet"'  # the raw value on hover
    assert ">2026-12-04 01:46:33 UTC, part-00001-abc.snappy.parquet</code>" in page and shown in page
