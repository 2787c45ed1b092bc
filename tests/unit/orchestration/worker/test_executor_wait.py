"""A job whose Spark application gets no executor (a standalone master with no free cores) does
not wait without end: its page names what an operator can do, an event says it began to wait,
and past SPARK_EXECUTOR_WAIT_LIMIT_SECONDS it is given up (Spark's jobs cancelled) and ends
FAILED saying why. The clock is passed in: nothing here waits."""

from __future__ import annotations

import threading

import pytest

from portal.events.models import Event
from portal.orchestration.state import joblogs
from portal.orchestration.worker.heartbeat import OPERATOR_OPTIONS, WAITING_EVENT, JobHeartbeat
from tests.unit.orchestration.factories import JobExecutionFactory

pytestmark = pytest.mark.django_db

SHORTAGE = "Spark application app-20260301-0007 on spark://m:7077 has no Spark executors."


@pytest.fixture
def beats(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path)
    settings.SPARK_EXECUTOR_WAIT_LIMIT_SECONDS = 600
    job = JobExecutionFactory()
    log = joblogs.JobLog(job.execution_id, job.job_name, 1)
    yield JobHeartbeat(job, 1, threading.Event(), log)
    log.close()


def test_a_job_waiting_for_executors_names_the_options_raises_an_event_and_is_given_up(beats):
    shown = beats.shortage(SHORTAGE, now=1000.0)["message"]
    assert OPERATOR_OPTIONS in shown and "spark.cores.max" in shown and "another executor" in shown
    assert "given up 600 s after it began to wait" in shown
    beats.raise_wait_alert()
    beats.raise_wait_alert()  # once per attempt
    (event,) = Event.objects.filter(kind=WAITING_EVENT)
    execution = beats.job.execution
    assert (event.flow_group, event.flow_name, event.execution_id, event.job_name) == (
        execution.flow_group,
        execution.flow_name,
        execution.execution_id,
        beats.job.job_name,
    )
    assert SHORTAGE in event.message and OPERATOR_OPTIONS in event.message

    beats.shortage(SHORTAGE, now=1599.0)
    assert not beats.cancel.is_set() and not beats.gave_up
    beats.shortage(SHORTAGE, now=1600.0)

    assert beats.cancel.is_set()  # the pipeline cancels the job's Spark jobs
    assert beats.gave_up.startswith("Given up after waiting 600 s for Spark executors")
    assert OPERATOR_OPTIONS in beats.gave_up and beats.gave_up in beats.log.path.read_text()


def test_executors_that_come_in_time_end_the_wait(beats):
    beats.shortage(SHORTAGE, now=1000.0)
    assert beats.shortage("", now=1500.0) == {"message": ""}
    beats.shortage(SHORTAGE, now=2000.0)  # waits again: the limit counts from here
    beats.shortage(SHORTAGE, now=2500.0)
    assert not beats.cancel.is_set()


def test_no_limit_waits_as_long_as_it_takes(beats, settings):
    settings.SPARK_EXECUTOR_WAIT_LIMIT_SECONDS = 0
    beats.shortage(SHORTAGE, now=0.0)
    assert "given up" not in beats.shortage(SHORTAGE, now=10**9)["message"]
    assert not beats.cancel.is_set()
