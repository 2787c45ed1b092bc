"""A user's day, in a real browser: log in through LDAP, create a flow with
the form (a mistake, seen live, then fixed; the schedule and compile
previews), run it now from its page, watch it commit without reloading,
and read its execution and log."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from tests import ldap_server
from tests.builders.queues import E2E_INGEST_QUEUE as INGEST_QUEUE
from tests.e2e import ui
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db(transaction=True)

NUMBERS_TEMPLATE = """\
gobblin.template.required_attributes = "numbers.per.run"
flowport.attribute.numbers.per.run.description = "How many numbers each run emits"
flowport.attribute.numbers.per.run.default = "10"
source.class = tests.integration.sources.CountingSource
writer.output.format = json
"""


def test_ldap_login_refuses_a_wrong_password_and_lets_the_right_one_in(page, directory, stack):
    page.goto("/flows/")  # not signed in: sent to the login page, and back after
    expect(page).to_have_url(re.compile(r"/login/\?next=/flows/"))
    expect(page.get_by_text("the Flowport test directory")).to_be_visible()
    ui.screenshot(page, "login")

    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".errors[role=alert]")).to_be_visible()
    expect(page.locator("header .who")).to_have_count(0)
    ui.screenshot(page, "login-refused")

    page.get_by_label("Password").fill(ldap_server.PEOPLE["alice"][0])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/flows/$"))
    expect(page.locator("header .who")).to_have_text("alice")
    alice = ui.user("alice")
    assert alice.email == "alice@flowport.test" and alice.first_name == "Alice"  # from the directory
    assert not alice.is_staff


def test_a_user_creates_a_flow_runs_it_and_watches_it_commit(context, page, logged_in, lake):
    alice = logged_in("alice")
    make_pack(alice, name="numbers-pack", templates={"numbers.template": NUMBERS_TEMPLATE})

    # --- the form ----------------------------------------------------------------------
    page.goto("/flows/new/")
    expect(page.locator("#flow-form")).to_be_visible()
    ui.screenshot(page, "flow-form")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill("numbers")
    page.locator("#id_source").select_option("landing")
    page.locator("#id_destination-lake").check()

    # Picking the template brings its required attribute, with its default and description.
    page.locator("#id_template_uris").select_option("pack://numbers-pack/numbers.template")
    attribute = page.locator("#id_attr-numbers-per-run")
    expect(attribute).to_have_value("10")
    expect(page.locator("#template-attributes")).to_contain_text("How many numbers each run emits")
    attribute.fill("7")

    # A bad schedule is pointed out next to the field while typing, then fixed.
    schedule = page.locator("#id_schedule")
    schedule.fill("every night at 3")
    expect(page.locator("#id_schedule_errors .error")).to_be_visible()
    expect(page.locator("#field-schedule")).to_have_class(re.compile(r"\binvalid\b"))
    expect(schedule).to_have_attribute("aria-invalid", "true")
    ui.screenshot(page, "flow-form-schedule-error")
    schedule.fill("0 3 * * *")
    expect(page.locator("#id_schedule_errors .error")).to_have_count(0)
    expect(schedule).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#schedule-summary")).to_contain_text("Runs")
    expect(page.locator("#schedule-runs .next-runs li")).to_have_count(5)
    expect(page.locator("#schedule-runs .next-runs li").first).to_contain_text("03:00")

    # Property rows: the two blank ones, then one more added in place.
    page.locator("#id_prop-0-key").fill("job.commit.policy")
    page.locator("#id_prop-0-value").fill("full")
    page.locator("#id_prop-1-key").fill("extract.namespace")
    page.locator("#id_prop-1-value").fill("e2e")
    page.get_by_role("button", name="Add property").click()
    expect(page.locator("#id_prop-2-key")).to_be_focused()
    page.locator("#id_prop-2-key").fill("job.retry.count")
    page.locator("#id_prop-2-value").fill("1")
    expect(page.locator("#id_run_immediately")).not_to_be_checked()

    # The compile preview: the job DAG and the executor it lands on, before saving.
    page.locator("#compile-preview-button").click()
    preview = page.locator("#compile-preview")
    expect(preview).to_contain_text("compiled")
    expect(preview.locator("tbody tr")).to_have_count(1)
    expect(preview).to_contain_text("landing → lake")
    expect(preview).to_contain_text("ingest")
    expect(preview).to_contain_text(INGEST_QUEUE)
    assert not FlowConfig.objects.exists(), "a preview saved something"
    ui.screenshot(page, "flow-form-compile-preview")

    page.locator("#save-flow").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers/$"))
    expect(page.locator(".messages")).to_contain_text("saved")
    expect(page.locator(".badge.compiled").first).to_be_visible()
    flow = FlowConfig.objects.get(flow_group="e2e", flow_name="numbers")
    assert flow.owner == alice and flow.schedule == "0 3 * * *" and flow.destinations == ["lake"]
    assert flow.properties["numbers.per.run"] == "7"
    assert flow.properties["job.retry.count"] == "1" and flow.properties["job.commit.policy"] == "full"

    # --- run now, watched live on the dashboard (another tab) and the execution page -----
    dashboard = context.new_page()
    dashboard.goto("/")
    committed_count = dashboard.locator(".stat.committed .stat-value")
    expect(committed_count).to_have_text("0")
    on_dashboard = ui.SameDocument.mark(dashboard)

    runs = page.locator("#flow-executions")
    expect(runs).to_contain_text("No executions yet.")
    runs.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/numbers/\d+/$"))
    execution = FlowExecution.objects.get(flow=flow)
    on_execution = ui.SameDocument.mark(page)
    status = page.locator("#execution-status h2 .badge").first
    first_status = status.inner_text()
    expect(status).to_have_text("COMMITTED", timeout=120_000)
    assert first_status != "COMMITTED", "nothing to watch: the run had finished before the page showed"
    assert on_execution.swaps() >= 1  # the status came by htmx polling, not a reload
    expect(page.locator("#execution-status .live")).to_have_count(0)  # polling stopped
    ui.screenshot(page, "execution-committed")

    expect(committed_count).to_have_text("1", timeout=15_000)
    assert on_dashboard.swaps() >= 1
    ui.screenshot(dashboard, "dashboard-after-run")
    dashboard.close()
    assert ui.published_ids(lake / "lake") == list(range(1, 8))

    # --- the flow page lists it; its execution page shows the job DAG and log ----------
    page.goto("/flows/e2e/numbers/")
    row = page.locator("#flow-executions tbody tr").first
    expect(row).to_contain_text("COMMITTED")
    ui.screenshot(page, "flow-detail")
    expect(row).to_contain_text(str(execution.execution_id))  # the id beside the name
    row.get_by_role("link", name=execution.display_name).click()
    expect(page).to_have_url(re.compile(rf"/executions/e2e/numbers/{execution.execution_id}/$"))
    job = page.locator("article.dag-job").first
    expect(job.locator(".job-name")).to_have_text("e2e.numbers.1-landing-to-lake")
    expect(job).to_contain_text("7 records")
    expect(job.locator(".badge")).to_have_text("COMMITTED")
    log = job.locator("pre.log")
    expect(log).to_be_visible()
    expect(log).to_contain_text("attempt 1")  # the worker's lines about this job
    expect(log).to_contain_text("7 extracted")
    ui.screenshot(page, "execution-log")
    # The whole logs of the job: the worker's lines and the Spark driver's.
    job.get_by_role("link", name="Worker and Spark driver logs of e2e.numbers.1-landing-to-lake").click()
    expect(page).to_have_url(re.compile(r"/jobs/e2e\.numbers\.1-landing-to-lake/log/$"))
    worker_log, driver_log = page.locator("pre.log-full").all()
    expect(worker_log).to_contain_text("7 extracted")
    expect(driver_log).to_contain_text("Executor: Running task")
    ui.screenshot(page, "job-log")


def test_a_flow_saved_without_a_destination_is_refused_by_the_destinations_field(page, logged_in, lake):
    """The flow could never run: the save is refused and the page says why, by the field."""
    alice = logged_in("alice")
    make_pack(alice, name="numbers-pack", templates={"numbers.template": NUMBERS_TEMPLATE})
    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill("nowhere")
    page.locator("#id_source").select_option("landing")
    page.locator("#id_template_uris").select_option("pack://numbers-pack/numbers.template")
    expect(page.locator("#id_attr-numbers-per-run")).to_have_value("10")
    page.locator("#id_schedule").fill("0 3 * * *")
    page.locator("#save-flow").click()

    errors = page.locator("#id_destinations_errors .error")
    expect(errors).to_have_text("Choose at least one destination data node.")
    expect(page.locator("#field-destinations")).to_have_class(re.compile(r"\binvalid\b"))
    summary = page.locator("#error-summary")
    expect(summary).to_contain_text("Destinations: Choose at least one destination data node.")
    ui.screenshot(page, "flow-form-no-destination")
    assert not FlowConfig.objects.filter(flow_name="nowhere").exists()

    # Ticking one and saving again creates it.
    page.locator("#id_destination-lake").check()
    page.locator("#save-flow").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/nowhere/$"))
    assert FlowConfig.objects.get(flow_name="nowhere").destinations == ["lake"]
