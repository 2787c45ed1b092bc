"""Stories of reading one attempt's logs like in Airflow: download them
whole, search them, keep only the warnings and errors."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.orchestration.state import logview
from portal.orchestration.state.joblogs import JobLog
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db

DRIVER = """\
2026-03-01T12:00:00.000Z INFO [Thread-3] Executor: Running task 0.0 in stage 0.0
2026-03-01T12:00:01.000Z WARN [Thread-3] TaskSetManager: Lost task 1.0 (orders_2026)
2026-03-01T12:00:02.000Z ERROR [Thread-3] Executor: Exception in task 1.0
java.io.IOException: no space left on device
\tat org.apache.spark.Writer.write(Writer.java:42)
2026-03-01T12:00:03.000Z INFO [Thread-3] Executor: Finished task 0.0 (orders_2025)
"""


@pytest.fixture(autouse=True)
def log_dir(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")


@pytest.fixture
def job(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    job = JobExecutionFactory(
        execution=FlowExecutionFactory(flow=flow),
        job_name="sales.orders.1-a-to-b",
        status="FAILED",
        attempt=1,
    )
    log = JobLog(job.execution.execution_id, job.job_name, 1)
    log.hide(["hunter2-secret"])
    log.write("attempt 1 on w1; password hunter2-secret")
    log.write("failed: IOException: no space left", "ERROR")
    log.driver_path.write_text(DRIVER)
    log.close()
    return job


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def url(job, tail: str = "") -> str:
    e = job.execution
    return f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/log/{tail}"


def test_each_log_of_an_attempt_downloads_whole_and_masked(browser, job):
    page = browser.get(url(job)).content.decode()
    assert f'href="{url(job, "download/")}?attempt=1&amp;log=worker" download' in page
    assert "Download worker log" in page and "Download Spark driver log" in page
    response = browser.get(url(job, "download/"), {"attempt": 1, "log": "worker"})
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert (
        f"sales-orders-{job.execution.execution_id}-sales.orders.1-a-to-b.1.log"
        in response["Content-Disposition"]
    )
    body = b"".join(response.streaming_content).decode()
    assert "INFO attempt 1 on w1; password ********" in body and "hunter2" not in body
    assert "ERROR failed: IOException" in body
    driver = browser.get(url(job, "download/"), {"attempt": 1, "log": "driver"})
    assert b"no space left on device" in b"".join(driver.streaming_content)


def test_a_log_this_host_does_not_hold_downloads_as_the_stored_tail(browser, owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="remote", owner=owner)
    job = JobExecutionFactory(
        execution=FlowExecutionFactory(flow=flow),
        job_name="j",
        attempt=1,
        log_excerpt="tail from elsewhere\n",
    )
    response = browser.get(url(job, "download/"), {"log": "worker"})
    assert response.status_code == 200 and response.content == b"tail from elsewhere\n"
    assert browser.get(url(job, "download/"), {"log": "driver"}).status_code == 404
    assert browser.get(url(job, "download/"), {"log": "passwd"}).status_code == 400
    assert browser.get(url(job, "download/"), {"attempt": 7}).status_code == 404


def test_an_unmasked_driver_log_is_never_downloaded_whole(browser, owner, settings):
    flow = FlowConfigFactory(flow_group="sales", flow_name="running", owner=owner)
    job = JobExecutionFactory(
        execution=FlowExecutionFactory(flow=flow),
        job_name="j",
        attempt=1,
        status="RUNNING",
        driver_log_excerpt="masked tail ********\n",
    )
    log = JobLog(job.execution.execution_id, job.job_name, 1)
    log.driver_path.write_text("password=hunter2-secret\n")  # still running: not masked yet
    response = browser.get(url(job, "download/"), {"log": "driver"})
    assert response.content == b"masked tail ********\n"


def test_searching_keeps_the_matching_lines_and_marks_the_matches(browser, job):
    page = browser.get(url(job), {"q": "ORDERS_2025"}).content.decode()
    assert "1 of 6 lines match." in page
    assert "Finished task 0.0 (<mark>orders_2025</mark>)" in page
    assert "Lost task 1.0" not in page


def test_a_level_keeps_that_level_and_above_with_its_stack_trace(browser, staff, job):
    """Staff read the log whole (the owner reads its frames folded: orchestration.redaction)."""
    reader = Client()
    reader.force_login(staff)
    page = reader.get(url(job), {"level": "WARN"}).content.decode()
    assert '<span class="log-line level-warn">' in page and "Lost task 1.0" in page
    assert "\tat org.apache.spark.Writer.write" in page  # the trace belongs to its ERROR line
    assert "Running task 0.0" not in page and "Finished task 0.0" not in page
    assert "1 of 2 lines match." in page  # the worker log: its one ERROR line
    owners = browser.get(url(job), {"level": "WARN"}).content.decode()
    assert "\tat org.apache" not in owners and "[stack frames hidden]" in owners
    errors_only = reader.get(url(job), {"level": "error", "q": "space"}).content.decode()
    assert "1 of 6 lines match." in errors_only  # the exception under the ERROR line
    assert "no <mark>space</mark> left on device" in errors_only
    assert "Lost task" not in errors_only


def test_a_bad_level_is_named_and_the_whole_log_shown(browser, job):
    response = browser.get(url(job), {"level": "LOUD"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "level must be one of DEBUG, INFO, WARN, ERROR, got &#x27;LOUD&#x27;." in page
    assert "Running task 0.0" in page


def test_search_text_is_escaped_not_markup(browser, job):
    page = browser.get(url(job), {"q": "<b>"}).content.decode()
    assert "<mark><b></mark>" not in page and "0 of 6 lines match." in page


def test_the_live_page_keeps_its_filter_while_it_refreshes(browser, job):
    job.status = "RUNNING"
    job.save()
    page = browser.get(url(job), {"q": "task", "level": "warn"}).content.decode()
    assert "?attempt=1&amp;q=task&amp;level=WARN" in page and 'hx-trigger="every 2s"' in page


def test_only_who_may_see_the_execution_downloads_its_logs(job):
    outsider = Client()
    assert outsider.get(url(job, "download/")).status_code == 302  # to the login page


def test_levels_come_from_the_line_or_the_line_above():
    assert logview.line_level("2026-03-01T12:00:00Z ERROR boom") == "ERROR"
    assert logview.line_level("26/03/01 12:00:00 WARN TaskSetManager: x") == "WARN"
    assert logview.line_level("\tat Foo.bar(Foo.java:1)", "ERROR") == "ERROR"
    assert logview.line_level("2026-03-01T12:00:00Z task 0 INFO-ish text") == "INFO"
    assert logview.line_level("2026-03-01T12:00:00Z FATAL x") == "ERROR"
