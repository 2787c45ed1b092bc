"""Stories of a job's tries (Airflow's task tries): a run that failed and was retried, redelivered
or resumed keeps each try — its worker, times, status and reason — on the execution page and in
the status API, not only the last try's COMMITTED."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.orchestrator import sweep_lost_jobs
from portal.orchestration.models import Action, ActionKind, JobExecution, JobState, JobStatus
from portal.orchestration.state import statestore, tries
from portal.orchestration.worker import executor
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import two_hop_flow

pytestmark = pytest.mark.django_db


def first_job(flow, owner) -> JobExecution:
    execution = services.run_now(flow, user=owner)
    process_actions()
    return execution.jobs.order_by("hop_index").first()


def worker_runs(job: JobExecution, worker: str, status: str, message: str = "") -> None:
    """What a worker does with a dispatched try: claim it, record its run, report how it ended."""
    job.refresh_from_db()
    claimed = executor.claim(job.pk, job.attempt, worker)
    assert claimed is not None
    state = statestore.start_job_state(claimed, job.attempt, worker)
    if status != JobStatus.RUNNING:
        executor.report(claimed, job.attempt, status, message=message)
        statestore.finish_job_state(state, status, message)
        process_actions()


def retry_now(job: JobExecution) -> None:
    """The retry's backoff is over."""
    JobExecution.objects.filter(pk=job.pk).update(not_before=timezone.now())
    Action.objects.filter(kind=ActionKind.REEVALUATE, done_at__isnull=True).update(due_at=timezone.now())
    process_actions()


def page_of(execution, user) -> str:
    browser = Client()
    browser.force_login(user)
    url = f"/executions/{execution.flow_group}/{execution.flow_name}/{execution.execution_id}/"
    return browser.get(url).content.decode()


def test_a_failed_try_stays_beside_the_retry_that_committed(owner):
    flow = two_hop_flow(owner, properties={"job.retry.count": "1", "job.retry.backoff.seconds": "30"})
    job = first_job(flow, owner)
    worker_runs(job, "worker-a", JobStatus.FAILED, "Connection refused by db-1:5432")
    retry_now(job)
    worker_runs(job, "worker-b", JobStatus.COMMITTED)
    job.refresh_from_db()
    assert job.status == JobStatus.COMMITTED

    shown = tries.tries_of(job)
    assert [(t.attempt, t.cause, t.status, t.worker) for t in shown] == [
        (1, "first try", JobStatus.FAILED, "worker-a"),
        (2, "retry after a failure", JobStatus.COMMITTED, "worker-b"),
    ]
    assert "Connection refused" in shown[0].message and shown[0].ended_at is not None

    page = page_of(job.execution, owner)
    assert page.count('data-test="try"') == 2
    assert "Connection refused by db-1:5432" in page and "retry after a failure" in page

    api = api_client_for(owner).get(f"/api/flowstatuses/{flow.flow_group}/{flow.flow_name}").json()
    first = api["jobStatuses"][0]
    assert [(t["attempt"], t["status"], t["worker"]) for t in first["tries"]] == [
        (1, "FAILED", "worker-a"),
        (2, "COMMITTED", "worker-b"),
    ]
    assert first["tries"][0]["startTime"] and first["tries"][0]["endTime"]


def test_the_lists_of_runs_say_a_run_needed_an_earlier_try(owner):
    """The flow page's executions card and the Executions page, where one looks first, tell a
    retried run from one that went through at once (Airflow's try number), in one query."""
    flow = two_hop_flow(owner, properties={"job.retry.count": "1", "job.retry.backoff.seconds": "30"})
    job = first_job(flow, owner)
    worker_runs(job, "worker-a", JobStatus.FAILED, "Connection refused by db-1:5432")
    retry_now(job)
    worker_runs(job, "worker-b", JobStatus.COMMITTED)
    other = FlowConfigFactory(
        owner=owner, flow_group="demo", flow_name="smooth", source="a", destinations=["c"]
    )
    smooth = first_job(other, owner)
    worker_runs(smooth, "worker-a", JobStatus.COMMITTED)

    counted = {e.flow_name: e.earlier_tries for e in tries.count_earlier([job.execution, smooth.execution])}
    assert counted == {flow.flow_name: 1, "smooth": 0}

    browser = Client()
    browser.force_login(owner)
    card = browser.get(f"/executions/{flow.flow_group}/{flow.flow_name}/", headers={"HX-Request": "true"})
    listing = browser.get("/executions/").content.decode()
    for page in (card.content.decode(), listing):
        assert page.count('data-test="earlier-tries"') == 1
        assert "after 1 earlier try" in page
    quiet = browser.get(f"/executions/{flow.flow_group}/smooth/", headers={"HX-Request": "true"})
    assert 'data-test="earlier-tries"' not in quiet.content.decode()


def test_a_try_whose_worker_died_is_kept_as_failed_and_the_next_says_it_was_redelivered(owner):
    job = first_job(two_hop_flow(owner), owner)
    worker_runs(job, "dead-worker", JobStatus.RUNNING)
    JobExecution.objects.filter(pk=job.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert sweep_lost_jobs() == 1
    job.refresh_from_db()
    shown = tries.tries_of(job)
    assert [(t.attempt, t.status, t.worker) for t in shown] == [
        (1, JobStatus.FAILED, "dead-worker"),
        (2, JobStatus.ORCHESTRATED, ""),
    ]
    assert "stopped heartbeating" in shown[0].message
    assert shown[1].cause == "redelivered: its worker stopped" and shown[1].started_at is None  # queued


def test_a_try_no_worker_took_is_kept_when_the_job_is_resumed(owner):
    job = first_job(two_hop_flow(owner), owner)
    deadline = Action.objects.get(kind=ActionKind.ENFORCE_JOB_START_DEADLINE, job_name=job.job_name)
    Action.objects.filter(pk=deadline.pk).update(due_at=timezone.now())
    process_actions()  # nobody took it: FAILED, so is the execution
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    services.resume(job.execution, user=owner)
    process_actions()
    job.refresh_from_db()
    shown = tries.tries_of(job)
    assert [(t.attempt, t.cause, t.status) for t in shown] == [
        (1, "first try", JobStatus.FAILED),
        (2, "resumed by hand", JobStatus.ORCHESTRATED),
    ]
    assert "start deadline" in shown[0].message and shown[0].worker == ""


def test_a_job_keeps_only_its_last_tries(owner):
    job = first_job(two_hop_flow(owner), owner)
    for attempt in range(2, tries.TRIES_KEPT + 5):
        tries.close(job, attempt - 1)
        tries.open_next(job, attempt, "RESUME")
    kept = JobState.objects.filter(job=job).order_by("attempt").values_list("attempt", flat=True)
    assert len(kept) == tries.TRIES_KEPT and kept[len(kept) - 1] == tries.TRIES_KEPT + 4


def test_a_job_tried_once_shows_no_tries_table(owner):
    job = first_job(two_hop_flow(owner), owner)
    worker_runs(job, "worker-a", JobStatus.COMMITTED)
    assert 'data-test="tries"' not in page_of(job.execution, owner)
