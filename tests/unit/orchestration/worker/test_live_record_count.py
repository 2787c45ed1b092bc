"""The processed-record count of a running job moves as its tasks finish
: the worker's heartbeat stores what the finished tasks extracted."""

from __future__ import annotations

import threading
import time

import pytest

from portal.orchestration.models import JobExecution
from portal.orchestration.state.joblogs import JobLog
from portal.orchestration.worker.heartbeat import JobHeartbeat
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory


@pytest.fixture(autouse=True)
def log_dir(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")


def task(task_id: int, records: int) -> dict:
    return {
        "task_id": task_id,
        "dataset_urn": f"t{task_id}",
        "status": "SUCCEEDED",
        "records_extracted": records,
    }


@pytest.mark.django_db(transaction=True)  # the heartbeat writes from its own thread and connection
def test_the_count_moves_with_each_finished_task_while_the_job_runs(owner, settings):
    settings.WORKER_HEARTBEAT_SECONDS = 0.5
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    job = JobExecutionFactory(
        execution=FlowExecutionFactory(flow=flow), job_name="j", status="RUNNING", attempt=1
    )
    log = JobLog(job.execution.execution_id, job.job_name, 1)

    def count_becomes(expected: int) -> None:
        deadline = time.monotonic() + 10
        while JobExecution.objects.get(pk=job.pk).processed_count != expected:
            assert time.monotonic() < deadline, f"the count never reached {expected}"
            time.sleep(0.1)

    with JobHeartbeat(job, 1, threading.Event(), log):
        log.task_state(task(0, 40))
        count_becomes(40)
        log.task_state(task(1, 2))
        count_becomes(42)
    assert "task 1 t1 SUCCEEDED: 2 extracted" in log.path.read_text()
