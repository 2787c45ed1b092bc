"""A job's Spark panel: the heartbeat keeps what Spark did to the job (executors lost and
regained, task attempts retried, no executors to run on) as entries beside the log lines, and the
execution page lists them with the application's id and state; the Spark UI link is the portal's
own, for staff, while the job runs."""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from portal.orchestration.models import JobExecution
from portal.orchestration.state import joblogs
from portal.orchestration.worker.heartbeat import EVENTS_KEPT, SPARK_KEY, JobHeartbeat
from portal.pipeline.spark.session import get_or_create_spark
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

JOB = "sales.orders.1-a-to-b"
SHORTAGE = (
    "Spark application app-20260301-0007 on spark://m:7077 has no Spark executors: the master gave it "
    "no cores"
)


@pytest.fixture
def beats(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path)
    log = joblogs.JobLog(9, JOB, 1)
    yield JobHeartbeat(JobExecution(job_name=JOB, attempt=1), 1, threading.Event(), log)
    log.close()


def test_what_spark_did_to_a_job_is_kept_as_entries_and_told_in_its_log(beats):
    """A cluster application starts with two executors, a task attempt fails, a Spark worker dies
    (one executor lost), the master gives it none for a while, then they come back."""
    beats.executors_seen("app-20260301-0007", 2)  # the first beat: nothing changed yet
    beats.spark_events({"tasks_failed": 1})
    beats.executors_seen("app-20260301-0007", 1)
    beats.executors_seen("app-20260301-0007", 0)
    assert beats.shortage(SHORTAGE)["message"].startswith(
        f"Waiting for Spark executors: {SHORTAGE} What to do:"
    )
    beats.shortage(SHORTAGE)  # still waiting: said once
    beats.executors_seen("app-20260301-0007", 2)
    assert beats.shortage("") == {"message": ""}

    record = beats.progress()[SPARK_KEY]
    kinds = [
        (event["kind"], {k: v for k, v in event.items() if k not in ("at", "kind", "message")})
        for event in record["events"]
    ]
    assert kinds == [
        ("task_attempts_failed", {"failed": 1, "failed_so_far": 1}),
        ("executors_lost", {"lost": 1, "executors": 1}),
        ("executors_lost", {"lost": 1, "executors": 0}),
        ("no_executors", {}),
        ("executors_added", {"added": 2, "executors": 2}),
        ("executors_back", {}),
    ]
    assert "Initial job has not accepted any resources" in record["events"][3]["message"]
    assert record["events"][1]["message"] == (
        "Spark application app-20260301-0007 lost 1 executor(s), 1 left: their tasks run again on the others"
    )
    logged = beats.log.path.read_text()
    for event in record["events"]:
        assert event["message"] in logged  # the log says each of them too


def test_only_the_latest_events_are_kept_and_the_rest_counted(beats):
    for failed in range(1, EVENTS_KEPT + 6):
        beats.spark_events({"tasks_failed": failed})
    record = beats.progress()[SPARK_KEY]
    assert len(record["events"]) == EVENTS_KEPT and record["earlier_events"] == 5
    assert record["events"][-1]["failed_so_far"] == EVENTS_KEPT + 5


def test_the_application_that_runs_the_job_is_recorded_when_its_session_is_attached(beats):
    spark = get_or_create_spark("local[1]", "flowport-panel-tests", {"spark.ui.enabled": "false"})
    beats.attach(spark)
    record = beats.progress()[SPARK_KEY]
    assert record["application_id"] == spark.sparkContext.applicationId
    assert record["master"].startswith("local") and record["executors"] is None
    assert record["state"] == "RUNNING" and record["submitted"] is False and record["events"] == []


# --- the page ---------------------------------------------------------------------------------


def spark_record(**fields):
    return {
        "application_id": "app-20260301-0007",
        "master": "spark://m:7077",
        "submitted": False,
        "state": "RUNNING",
        "executors": 1,
        "seen_at": "2026-03-01T12:05:00+00:00",
        "events": [
            {
                "at": "2026-03-01T12:03:00+00:00",
                "kind": "executors_lost",
                "message": "Spark application app-20260301-0007 lost 1 executor(s), 1 left: their tasks run "
                "again on the others",
                "lost": 1,
                "executors": 1,
            },
            {
                "at": "2026-03-01T12:04:00+00:00",
                "kind": "task_attempts_failed",
                "message": "2 Spark task attempt(s) failed; Spark runs them again (up to "
                "spark.task.maxFailures); 2 so far",
                "failed": 2,
                "failed_so_far": 2,
            },
        ],
        "earlier_events": 0,
        **fields,
    }


@pytest.fixture
def job(owner):
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    execution = FlowExecutionFactory(flow=flow, status="RUNNING")
    return JobExecutionFactory(
        execution=execution,
        job_name=JOB,
        status="RUNNING",
        spark_ui_url="http://127.0.0.1:4041",
        progress={"fraction": 0.5, "state": "RUNNING", SPARK_KEY: spark_record()},
    )


def page(user, job) -> str:
    client = Client()
    client.force_login(user)
    e = job.execution
    response = client.get(f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/")
    assert response.status_code == 200
    return response.content.decode()


def proxy_path(job) -> str:
    e = job.execution
    return f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/spark-ui/"


def test_the_owner_reads_the_application_its_state_and_its_events_but_no_ui(owner, job):
    shown = page(owner, job)
    assert 'data-test="spark-panel"' in shown
    assert '<code data-test="spark-application">app-20260301-0007</code>' in shown
    assert '<dd data-test="spark-state">running with 1 executor</dd>' in shown
    assert shown.index('data-kind="executors_lost"') < shown.index('data-kind="task_attempts_failed"')
    assert "lost 1 executor(s), 1 left" in shown and "2 Spark task attempt(s) failed" in shown
    assert '<time datetime="2026-03-01T12:03:00+00:00">12:03:00</time>' in shown
    assert "for staff only" in shown
    assert proxy_path(job) not in shown and "4041" not in shown


def test_staff_get_the_portals_way_to_the_ui_while_the_job_runs(staff, job):
    shown = page(staff, job)
    assert f'href="{proxy_path(job)}"' in shown and "4041" not in shown
    job.status = "COMMITTED"
    job.save()
    shown = page(staff, job)
    assert proxy_path(job) not in shown
    assert "reachable only while the job runs" in shown
    assert '<dd data-test="spark-state">ran with 1 executor; its last heartbeat at 12:05:00 UTC</dd>' in shown
    job.spark_ui_url = ""  # the UI was off on its worker: nothing was ever reachable
    job.save()
    assert "none recorded for this job (off on its worker" in page(staff, job)


def test_a_waiting_application_says_so(owner, job):
    job.progress = {SPARK_KEY: spark_record(state="WAITING", executors=0, events=[])}
    job.save()
    shown = page(owner, job)
    assert "waiting for executors: the master has given it none" in shown
    assert "No executor lost, task attempt failed or wait for executors so far." in shown


def test_a_job_submitted_to_yarn_or_k8s_names_no_application_of_the_worker(owner, job, beats):
    """Its application is the cluster's own; the worker's local session only commits."""
    spark = get_or_create_spark("local[1]", "flowport-panel-tests", {"spark.ui.enabled": "false"})
    beats.attach(spark, submitted=True)
    job.progress = {SPARK_KEY: beats.record.to_dict()}
    job.save()
    shown = page(owner, job)
    assert "its own, started with spark-submit on the executor's cluster" in shown
    assert spark.sparkContext.applicationId not in shown
    assert "runs as an application of its own (spark-submit)" in shown


def test_a_job_without_a_record_yet_says_so(owner, job):
    job.progress = {}
    job.save()
    assert "No Spark application recorded for this attempt yet." in page(owner, job)


def test_the_api_gives_the_record_in_camel_case_and_the_proxy_to_staff_only(owner, staff, job):
    url = f"/api/flowexecutions/{job.execution.execution_id}"
    mine = api_client_for(owner).get(url).json()["jobStatuses"][0]
    assert mine["progress"]["spark"]["applicationId"] == "app-20260301-0007"
    assert mine["progress"]["spark"]["events"][0]["kind"] == "executors_lost"
    assert mine["sparkUiUrl"] == ""
    theirs = api_client_for(staff).get(url).json()["jobStatuses"][0]
    assert theirs["sparkUiUrl"] == f"http://testserver{proxy_path(job)}"
