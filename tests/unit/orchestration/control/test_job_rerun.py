"""Stories of re-running one failed job of an execution (Airflow's "clear
task"): it runs again with the jobs it kept from running, and nothing
that committed runs twice."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobStatus
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed(owner):
    """a committed; b (after a) failed and c (after b) skipped; d (after a, another branch) failed."""
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, status="FAILED")
    spec = {"properties": {}}
    for name, status, parents, hop in (
        ("a", "COMMITTED", [], 1),
        ("b", "FAILED", ["a"], 2),
        ("d", "FAILED", ["a"], 2),
        ("c", "SKIPPED", ["b"], 3),
    ):
        JobExecutionFactory(
            execution=execution,
            job_name=name,
            status=status,
            parents=parents,
            hop_index=hop,
            attempt=1,
            spec=spec,
        )
    return execution


def state(execution) -> dict[str, tuple[str, int]]:
    return {job.job_name: (job.status, job.attempt) for job in execution.jobs.all()}


def page_url(execution) -> str:
    return f"/executions/{execution.flow_group}/{execution.flow_name}/{execution.execution_id}/"


def test_re_running_one_job_keeps_its_committed_parent_and_the_other_failed_branch(failed, owner):
    services.rerun_job(failed, "b", user=owner)
    process_actions()
    jobs = state(failed)
    assert jobs["a"] == ("COMMITTED", 1)  # not run again
    assert jobs["b"] == (JobStatus.ORCHESTRATED, 2)  # dispatched: its parent is committed
    assert jobs["c"] == (JobStatus.PENDING, 2)  # waits for b
    assert jobs["d"] == ("FAILED", 1)  # the other branch is left alone
    failed.refresh_from_db()
    assert failed.status == ExecutionStatus.RUNNING and "Re-ran b (2 job(s)) by" in failed.message


def test_the_page_offers_re_run_on_each_failed_job_and_posts_it(failed, owner):
    browser = Client()
    browser.force_login(owner)
    page = browser.get(page_url(failed)).content.decode()
    assert page.count("Re-run this job") == 2  # b and d, not the committed or the skipped one
    response = browser.post(page_url(failed) + "jobs/d/rerun/", follow=True)
    assert "Re-run of d requested" in response.content.decode()
    process_actions()
    assert state(failed)["d"] == (JobStatus.ORCHESTRATED, 2) and state(failed)["b"] == ("FAILED", 1)


def test_a_committed_job_or_a_running_execution_cannot_be_re_run(failed, owner):
    with pytest.raises(services.NotAllowedNow, match="a is COMMITTED"):
        services.rerun_job(failed, "a", user=owner)
    with pytest.raises(services.NotAllowedNow, match="has no job zz"):
        services.rerun_job(failed, "zz", user=owner)
    FlowExecution.objects.filter(pk=failed.pk).update(status="RUNNING")
    failed.refresh_from_db()
    with pytest.raises(services.NotAllowedNow, match="execution that is RUNNING"):
        services.rerun_job(failed, "b", user=owner)


def test_outsiders_cannot_re_run_a_job(failed):
    stranger = Client()
    stranger.force_login(UserFactory())
    assert "Re-run this job" not in stranger.get(page_url(failed)).content.decode()
    assert stranger.post(page_url(failed) + "jobs/b/rerun/").status_code == 403
    assert stranger.get(page_url(failed) + "jobs/b/rerun/").status_code == 405


def test_the_api_re_runs_one_job_with_resume_and_a_job_name(failed, owner):
    api = api_client_for(owner)
    url = f"/api/flowexecutions/{failed.execution_id}/resume?job=b"
    response = api.post(url)
    assert response.status_code == 202, response.content
    assert response.json()["pendingRequests"] == ["RESUME"]
    process_actions()
    assert state(failed)["b"] == (JobStatus.ORCHESTRATED, 2) and state(failed)["d"] == ("FAILED", 1)
    conflict = api.post(f"/api/flowexecutions/{failed.execution_id}/resume?job=a")
    assert conflict.status_code == 409 and "a is COMMITTED" in conflict.json()["detail"]
