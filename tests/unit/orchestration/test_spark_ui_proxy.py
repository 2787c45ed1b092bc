"""Stella (staff) follows a running job's Spark UI link: the portal's proxy shows a real Spark
driver's UI (local, its UI on loopback), its links written under the proxy's address by Spark
itself, its files and REST API answered, Spark's own Content-Security-Policy kept; once the job
ended, the link leads nowhere."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from portal.orchestration import sparkui
from tests.factories import FlowConfigFactory
from tests.spark_ui import JOB_DESCRIPTION, SparkUI, running_spark_ui
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory


@pytest.fixture(scope="module")
def spark_ui():
    with running_spark_ui() as ui:
        yield ui


@pytest.fixture
def job(owner, spark_ui: SparkUI):
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    execution = FlowExecutionFactory(flow=flow, status="RUNNING")
    return JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="RUNNING", spark_ui_url=spark_ui.url
    )


@pytest.fixture
def stella(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def base(job) -> str:
    e = job.execution
    return f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/spark-ui"


def test_staff_read_the_running_jobs_spark_ui_through_the_portal(stella, job, spark_ui):
    first = stella.get(f"{base(job)}/")
    assert first.status_code == 302
    assert first["Location"] == f"{base(job)}/jobs/"  # Spark's redirect, under the proxy's address
    jobs = stella.get(first["Location"])
    assert jobs.status_code == 200 and jobs["Content-Type"].startswith("text/html")
    html = jobs.content.decode()
    assert JOB_DESCRIPTION in html
    assert f'href="{base(job)}/stages/"' in html  # Spark wrote its links under the proxy's path
    assert f'src="{base(job)}/static/jquery.min.js"' in html
    assert spark_ui.url not in html  # no bare address to follow
    assert "nonce-" in jobs["Content-Security-Policy"]  # Spark's own policy, kept
    assert jobs["Cache-Control"] == "private, no-store"
    assert "Set-Cookie" not in jobs
    css = stella.get(f"{base(job)}/static/webui.css")
    assert css.status_code == 200 and css["Content-Type"].startswith("text/css")
    api = stella.get(f"{base(job)}/api/v1/applications")
    assert api.status_code == 200
    assert [app["id"] for app in json.loads(api.content)] == [spark_ui.application_id]
    page = stella.get(f"{base(job)}/jobs/job/", {"id": "0"})
    assert page.status_code == 200 and JOB_DESCRIPTION in page.content.decode()


def test_once_the_job_ended_its_ui_is_not_reached_any_more(stella, job):
    job.status = "COMMITTED"
    job.save()
    response = stella.get(f"{base(job)}/jobs/")
    assert response.status_code == 404
    assert b"only while the job runs" in response.content


def test_a_ui_that_stopped_answering_is_a_502_saying_so(stella, job):
    job.spark_ui_url = "http://127.0.0.1:1"  # nothing listens there
    job.save()
    response = stella.get(f"{base(job)}/jobs/")
    assert response.status_code == 502
    assert b"did not answer" in response.content


@pytest.mark.parametrize(
    ("recorded", "usable"),
    [
        ("http://127.0.0.1:4040", True),
        ("https://worker-1.example:4040/", True),
        ("", False),
        ("javascript:alert(1)", False),
        ("file:///etc/passwd", False),
        ("http://admin:secret@127.0.0.1:4040", False),
        ("http://127.0.0.1:4040/admin/", False),
        ("http://127.0.0.1:4040/?next=x", False),
        ("http://127.0.0.1:99999", False),
    ],
)
def test_only_a_plain_web_origin_the_worker_recorded_is_a_ui(job, recorded, usable):
    job.spark_ui_url = recorded
    assert (sparkui.recorded_ui(job) is not None) is usable


@pytest.mark.parametrize(
    ("path", "asked"),
    [
        ("", "/"),
        ("jobs/", "/jobs/"),
        ("stages/stage/", "/stages/stage/"),
        ("static/webui.css", "/static/webui.css"),
        ("%2e%2e/x", "/%252e%252e/x"),  # encoded twice: a name, not a way up
        ("a b", "/a%20b"),
    ],
)
def test_a_path_inside_the_ui_is_asked_as_it_is(path, asked):
    assert sparkui.ui_path(path) == asked


@pytest.mark.parametrize(
    "path",
    [
        "../admin/",
        "jobs/../../x",
        "jobs//x",
        "./jobs",
        "http://169.254.169.254/",
        "a\\b",
        "jobs/\x00",
        "jobs/job/kill/",
    ],
)
def test_a_path_leaving_the_ui_or_killing_is_refused(path):
    with pytest.raises(sparkui.RefusedPath):
        sparkui.ui_path(path)
