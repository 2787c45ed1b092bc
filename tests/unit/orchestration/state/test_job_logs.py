"""Stories of a job's logs: the worker writes its own lines and the Spark
driver's, secrets never show in either, and the owner reads them on the
job's log page — whole when this host holds the files, the stored tail when
the worker ran elsewhere."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils.timezone import now

from portal.orchestration.models import JobExecution, JobState
from portal.orchestration.state.joblogs import DRIVER_EXCERPT_CHARS, JobLog, driver_log_path
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
POLL = 'hx-trigger="every 2s"'


@pytest.fixture(autouse=True)
def log_dir(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    return tmp_path / "logs"


@pytest.fixture
def job(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow)
    return JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="COMMITTED", attempt=2
    )


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def log_url(job, attempt: int | None = None) -> str:
    e = job.execution
    url = f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/log/"
    return f"{url}?attempt={attempt}" if attempt else url


def write_logs(job, attempt: int, worker_line: str, driver_line: str, *, ended: bool = True) -> JobLog:
    """What a worker leaves: its own lines, the JVM's driver lines, and (once
    the attempt ended) the driver log masked."""
    log = JobLog(job.execution.execution_id, job.job_name, attempt)
    log.write(worker_line)
    log.driver_path.write_text(f"2026-03-01T12:00:00.000Z INFO [Thread-3] Executor: {driver_line}\n")
    if ended:
        log.close()
    return log


def test_the_worker_masks_a_secret_in_its_lines_the_driver_log_and_the_stored_tail(job):
    log = write_logs(job, 2, "connecting", "url=jdbc:postgresql://db?password=hunter2-secret", ended=False)
    log.hide({"hunter2-secret", "abc"})  # "abc": too short to mask without mangling the log
    log.write("retrying with hunter2-secret from abc-host")

    fields = log.fields()
    assert "hunter2-secret" not in fields["driver_log_excerpt"]
    assert "password=********" in fields["driver_log_excerpt"]
    assert "retrying with ******** from abc-host" in fields["log_excerpt"]

    log.close()
    assert "hunter2-secret" not in log.driver_path.read_text()
    assert "password=********" in log.driver_path.read_text()


def test_a_secret_cut_by_the_stored_tail_leaves_no_piece_behind(job):
    log = JobLog(job.execution.execution_id, job.job_name, 2)
    log.hide({"hunter2-secret"})
    # The tail would start in the middle of the secret: "2-secret" and then the rest.
    log.driver_path.write_text("x" * 100 + "hunter2-secret" + "y" * (DRIVER_EXCERPT_CHARS - 8))
    excerpt = log.fields()["driver_log_excerpt"]
    assert len(excerpt) == DRIVER_EXCERPT_CHARS and "2-secret" not in excerpt


def test_a_driver_log_not_yet_masked_is_shown_from_its_stored_tail_only(browser, job):
    """While the attempt runs, or when its worker died, the file may hold what
    the worker has not masked yet: the page shows the tail the worker stored."""
    job.status = "RUNNING"
    job.driver_log_excerpt = "INFO Executor: Running task 0.0 (password=********)"
    job.save()
    write_logs(job, 2, "attempt 2 on w1", "Running task 0.0 (password=hunter2-secret)", ended=False)
    page = browser.get(log_url(job)).content.decode()
    assert "hunter2-secret" not in page
    assert "password=********" in page and "attempt 2 on w1" in page


def test_the_owner_reads_both_logs_of_the_latest_attempt(browser, job):
    write_logs(job, 2, "task 0 orders SUCCEEDED: 120 extracted", "Running task 0.0 in stage 3.0 (TID 7)")
    page = browser.get(log_url(job)).content.decode()
    assert "Worker log" in page and "120 extracted" in page
    assert "Spark driver log" in page and "Running task 0.0 in stage 3.0 (TID 7)" in page
    assert "Only the end of this log is shown" not in page
    assert POLL not in page  # the attempt finished


def test_an_earlier_attempt_has_logs_of_its_own(browser, job):
    write_logs(job, 1, "attempt 1 failed: boom", "Lost task 0.0")
    write_logs(job, 2, "attempt 2 committed", "Finished task 0.0")
    first = browser.get(log_url(job, 1)).content.decode()
    assert "attempt 1 failed: boom" in first and "attempt 2 committed" not in first
    assert 'aria-current="page">1<' in first


def test_the_stored_tail_stands_in_when_the_files_are_on_another_host(browser, job):
    job.log_excerpt = "task 0 orders SUCCEEDED: 120 extracted"
    job.driver_log_excerpt = "INFO Executor: Finished task 0.0 in stage 1.0 (TID 3)"
    job.save()
    page = browser.get(log_url(job)).content.decode()
    assert "120 extracted" in page and "Finished task 0.0 in stage 1.0" in page
    assert page.count("Only the end of this log is shown") == 2
    # Where the whole file is, relative to the log folder: the server's layout is staff's.
    assert f"logs:jobs/{job.execution.execution_id}/{job.job_name}.2.driver.log" in page
    assert str(driver_log_path(job.execution.execution_id, job.job_name, 2)) not in page


def test_a_running_attempt_refreshes_its_logs_until_it_ends(browser, job):
    job.status = "RUNNING"
    job.driver_log_excerpt = "INFO Executor: Running task 0.0"  # what the heartbeat stored
    job.save()
    write_logs(job, 2, "attempt 2 on worker-1", "Running task 0.0", ended=False)
    assert POLL in browser.get(log_url(job)).content.decode()
    fragment = browser.get(log_url(job), headers=HTMX)
    assert b"<html" not in fragment.content and b"Running task 0.0" in fragment.content
    assert b"attempt 2 on worker-1" in fragment.content
    assert POLL not in browser.get(log_url(job, 1)).content.decode()  # an earlier attempt is over


@pytest.mark.parametrize("attempt", ["3", "0", "first"])
def test_an_attempt_that_never_ran_is_not_found(browser, job, attempt):
    assert browser.get(f"{log_url(job)}?attempt={attempt}").status_code == 404


def test_an_unknown_job_is_not_found(browser, job):
    e = job.execution
    assert browser.get(f"/executions/sales/orders/{e.execution_id}/jobs/nope/log/").status_code == 404


def test_a_failed_attempt_logs_its_message_and_traceback_masked(job):
    log = JobLog(job.execution.execution_id, job.job_name, 2)
    log.hide({"hunter2-secret"})
    try:
        raise ConnectionError("refused for password hunter2-secret")
    except ConnectionError as exc:
        log.outcome("FAILED", "ConnectionError: refused for password hunter2-secret", exc)
    text = log.path.read_text()
    first, *rest = text.splitlines()
    assert first.endswith("ERROR failed: ConnectionError: refused for password ********")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "ConnectionError: refused for password ********"
    assert "hunter2-secret" not in text


def test_the_log_page_puts_the_error_first(job, browser):
    JobExecution.objects.filter(pk=job.pk).update(status="FAILED", message="1 of 1 task(s) failed: boom")
    job.refresh_from_db()
    log = write_logs(job, 2, "attempt 2 on host-a; previous watermarks: none", "Running task 0.0")
    log.task_state(
        {
            "task_id": "t0",
            "dataset_urn": "orders",
            "status": "FAILED",
            "error": "ValueError: boom",
            "traceback": 'Traceback (most recent call last):\n  File "task.py", line 9\nValueError: boom',
        }
    )
    log.outcome("FAILED", "1 of 1 task(s) failed: boom")
    log.write("a later INFO line")

    page = browser.get(log_url(job)).content.decode()
    error = page.split('data-test="attempt-error"')[1].split("</section>")[0]
    assert "Why attempt 2 failed" in error and "1 of 1 task(s) failed: boom" in error
    assert "ERROR failed: 1 of 1 task(s) failed" in error
    # The owner reads the exception, not the frames (staff read those: orchestration.redaction).
    assert "[traceback hidden]" in error and "ValueError: boom" in error and "task.py" not in error
    assert "previous watermarks" not in error and "a later INFO line" not in error
    assert page.index('data-test="attempt-error"') < page.index("Worker log")


def test_an_earlier_failed_attempt_shows_its_own_error_and_a_success_none(job, browser):
    JobState.objects.create(job=job, attempt=1, status="FAILED", message="lease lapsed", started_at=now())
    JobState.objects.create(job=job, attempt=2, status="COMMITTED", message="ok", started_at=now())
    write_logs(job, 1, "attempt 1", "x")
    write_logs(job, 2, "attempt 2", "y")
    assert "Why attempt 1 failed" in browser.get(log_url(job, 1)).content.decode()
    assert 'data-test="attempt-error"' not in browser.get(log_url(job, 2)).content.decode()
