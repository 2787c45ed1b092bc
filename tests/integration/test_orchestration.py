"""From run-now or a cron tick to committed output, through a real scheduler
process, the Redis broker, a real Celery worker and real Spark."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus, FlowExecution, JobExecution, JobStatus
from portal.orchestration.serializers import JobStatusSerializer
from tests.builders.stack import finished, make_flow, published_ids
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_now_commits_the_records_and_checks_in_the_watermark(lake, worker, scheduler):
    flow = make_flow()
    first = finished(services.run_now(flow, user=flow.owner))
    assert first.status == ExecutionStatus.COMMITTED, first.message
    job = first.jobs.get()
    assert (job.status, job.attempt, job.processed_count) == (JobStatus.COMMITTED, 1, 10)
    assert (job.progress["state"], job.progress["fraction"]) == ("FINISHED", 1.0)
    assert published_ids(lake / "lake" / "it" / "numbers-to-lake") == list(range(1, 11))
    assert DatasetState.objects.get(job_name=job.job_name, dataset_urn="numbers").watermark == "10"

    # The next run continues where the last one stopped.
    second = finished(services.run_now(flow, user=flow.owner))
    assert second.status == ExecutionStatus.COMMITTED, second.message
    assert second.jobs.get().low_watermark == "10"
    assert published_ids(lake / "lake" / "it" / "numbers-to-lake") == list(range(1, 21))


def test_each_job_keeps_its_own_worker_and_spark_driver_log(
    lake, worker, scheduler, stack_dir, client, settings
):
    flows = [make_flow(name=f"logged-{n}", **{"numbers.per.run": "40"}) for n in range(2)]
    # Both run at once in the worker's one SparkSession.
    executions = [finished(e) for e in [services.run_now(flow, user=flow.owner) for flow in flows]]
    jobs = [execution.jobs.get() for execution in executions]
    assert [j.status for j in jobs] == [JobStatus.COMMITTED] * 2, [e.message for e in executions]

    assert jobs[1].started_at < jobs[0].ended_at and jobs[0].started_at < jobs[1].ended_at  # overlapped
    task_ids = []
    for job in jobs:
        assert "40 extracted" in job.log_excerpt
        assert "Executor: Running task" in job.driver_log_excerpt, job.driver_log_excerpt[-2000:]
        driver_log = (
            stack_dir
            / "var"
            / "logs"
            / "jobs"
            / str(job.execution.execution_id)
            / f"{job.job_name}.1.driver.log"
        )
        task_ids.append(set(re.findall(r"\(TID (\d+)\)", driver_log.read_text())))
    # Spark numbers the tasks of its whole JVM: each log holds only its own job's.
    assert task_ids[0] and task_ids[1] and not task_ids[0] & task_ids[1], task_ids

    settings.FLOWPORT_LOG_DIR = str(stack_dir / "var" / "logs")
    client.force_login(jobs[0].execution.flow.owner)
    page = client.get(
        f"/executions/it/logged-0/{jobs[0].execution.execution_id}/jobs/{jobs[0].job_name}/log/"
    ).content.decode()
    assert "Spark driver log" in page and "Executor: Running task" in page and "40 extracted" in page
    assert "Only the end of this log is shown" not in page


def test_a_two_hop_flow_runs_its_jobs_in_order(lake, worker, scheduler):
    flow = make_flow("archive")
    execution = finished(services.run_now(flow, user=flow.owner))
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    first, second = execution.jobs.order_by("hop_index")
    assert (first.executor, second.executor) == ("ingest", "replicate")
    assert second.started_at >= first.ended_at
    assert published_ids(lake / "archive" / "it" / "numbers-to-archive") == list(range(1, 11))


def test_a_failing_parent_skips_its_child(lake, worker, scheduler, tmp_path):
    # A source that fails at run time (a bad value would be refused at save): no retries here.
    flow = make_flow("archive", **{"flaky.marker.file": str(tmp_path / "flaky")})
    execution = finished(services.run_now(flow, user=flow.owner))
    first, second = execution.jobs.order_by("hop_index")
    assert execution.status == ExecutionStatus.FAILED
    assert first.status == JobStatus.FAILED and "the source was unreachable" in first.message
    assert second.status == JobStatus.SKIPPED and first.job_name in second.message
    assert not (lake / "archive" / "it").exists()


def test_a_transient_failure_is_retried(lake, worker, scheduler, tmp_path):
    flow = make_flow(
        **{
            "flaky.marker.file": str(tmp_path / "flaky"),
            "job.retry.count": "2",
            "job.retry.backoff.seconds": "0.5",
        }
    )
    execution = finished(services.run_now(flow, user=flow.owner))
    job = execution.jobs.get()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    assert (job.attempt, job.retries) == (2, 1)
    assert published_ids(lake / "lake" / "it" / "numbers-to-lake") == list(range(1, 11))


def test_kill_cancels_the_running_job_and_resume_finishes_it(lake, worker, scheduler, tmp_path):
    release = tmp_path / "release"
    flow = make_flow(
        **{"slow.seconds.per.row": "2", "slow.release.file": str(release), "numbers.per.run": "40"}
    )
    execution = services.run_now(flow, user=flow.owner)
    wait_until(
        lambda: JobExecution.objects.filter(execution=execution, status=JobStatus.RUNNING).exists(),
        60,
        "the job to run",
    )
    time.sleep(1)  # let Spark start the slow stage
    services.kill(execution, user=flow.owner)
    finished(execution, timeout=60)
    job = execution.jobs.get()
    assert execution.status == ExecutionStatus.CANCELLED
    assert job.status == JobStatus.CANCELLED, job.message
    assert published_ids(lake / "lake") == []
    assert not DatasetState.objects.filter(dataset_urn="numbers").exists()

    release.touch()
    services.resume(execution, user=flow.owner)

    def committed():
        execution.refresh_from_db()
        return execution.status == ExecutionStatus.COMMITTED

    wait_until(committed, 90, "the resumed execution to commit")
    assert execution.jobs.get().attempt == 2
    assert published_ids(lake / "lake" / "it" / "numbers-to-lake") == list(range(1, 41))


def test_a_cron_flow_runs_at_its_tick(lake, worker, scheduler):
    flow = make_flow(schedule="* * * * *")
    next_minute = (datetime.now(UTC) + timedelta(minutes=1)).replace(second=0, microsecond=0)
    execution = wait_until(
        lambda: FlowExecution.objects.filter(flow=flow, trigger=FlowExecution.Trigger.SCHEDULE).first(),
        95,
        "the scheduler to turn the next tick into an execution",
    )
    assert execution.scheduled_at == next_minute
    assert finished(execution).status == ExecutionStatus.COMMITTED, execution.message


def test_a_fork_into_a_files_destination_publishes_each_branch_in_its_format(lake, worker, scheduler):
    flow = make_flow(
        name="forked",
        **{
            "fork.branches": "2",
            "writer.output.format.0": "parquet",
            "writer.output.format.1": "csv",
        },
    )
    execution = finished(services.run_now(flow, user=flow.owner), timeout=300)
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    job = execution.jobs.get()
    assert job.status == JobStatus.COMMITTED, job.message
    # Each branch delivers its own copy of the 10 rows read.
    assert (job.records_read, job.processed_count) == (10, 20), job.message
    published = lake / "lake" / "it" / "forked"
    parquet = sorted(published.rglob("*.parquet"))
    csv = sorted(published.rglob("*.csv"))
    assert parquet and csv, sorted(p.name for p in published.rglob("*"))
    ids = sorted(i for p in parquet for i in pq.read_table(p).column("id").to_pylist())
    assert ids == list(range(1, 11))
    rows = [line for p in csv for line in p.read_text().splitlines() if line and line != "id"]
    assert sorted(int(r) for r in rows) == list(range(1, 11))


def test_a_forked_first_hop_feeds_the_next_hop_its_first_branch(lake, worker, scheduler):
    flow = make_flow(
        "archive",
        name="forked-twice",
        **{"fork.branches": "2", "writer.output.format.0": "parquet", "writer.output.format.1": "csv"},
    )
    execution = finished(services.run_now(flow, user=flow.owner), timeout=300)
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    copied = sorted((lake / "archive" / "it" / "forked-twice").rglob("*.parquet"))
    assert sorted(i for p in copied for i in pq.read_table(p).column("id").to_pylist()) == list(range(1, 11))


def _people(lake: Path) -> None:
    folder = lake / "landing" / "people"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_text("id,name\n1,ann\n2,\n3,cid\n")
    (folder / "b.csv").write_text("id,name\n4,\n5,\n6,fay\n")
    os.utime(folder / "a.csv", (time.time() - 60, time.time() - 60))


def _checked_people_flow(name: str, policy_type: str):
    return make_flow(
        name=name,
        **{
            "source.class": "portal.pipeline.sources.files.FileSource",
            "source.files.format": "csv",
            "source.files.workunit.max.files": "1",  # two ranges, one per file
            "qualitychecker.row.policies": "NotNullPolicy",
            "qualitychecker.row.policy.types": policy_type,
            "qualitychecker.row.notnull.fields": "name",
        },
    )


def test_a_run_that_committed_nothing_reports_nothing_delivered_and_every_failed_row(lake, worker, scheduler):
    _people(lake)
    flow = _checked_people_flow("people-checked", "FAIL")
    execution = finished(services.run_now(flow, user=flow.owner), timeout=300)
    job = execution.jobs.get()
    assert job.status == JobStatus.FAILED
    assert "failed on 3 record(s) in 2 task(s)" in job.message, job.message
    assert (job.processed_count, job.records_read, job.records_rejected) == (0, 6, 3)
    assert job.high_watermark == ""  # nothing checked in: no watermark yet
    status = JobStatusSerializer(job).data
    assert (status["processedCount"], status["recordsRead"], status["recordsRejected"]) == (0, 6, 3)


def test_rows_sent_to_the_err_file_are_read_and_rejected_but_not_delivered(lake, worker, scheduler):
    _people(lake)
    flow = _checked_people_flow("people-err", "ERR_FILE")
    execution = finished(services.run_now(flow, user=flow.owner), timeout=300)
    job = execution.jobs.get()
    assert job.status == JobStatus.COMMITTED, job.message
    assert (job.processed_count, job.records_read, job.records_rejected) == (3, 6, 3)
    assert "3 record(s) delivered (6 read, 3 rejected)" in job.message
    stored = DatasetState.objects.get(job_name=job.job_name, dataset_urn="people").watermark
    assert job.high_watermark == stored and stored.endswith(":b.csv")
