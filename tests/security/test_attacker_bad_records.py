"""A flow's owner downloads their job's bad records. The paths the page reads come from the run,
whose folders the flow's properties choose, so an owner who could steer them must still get only
files the pipeline names for that run's bad records, judged on the file actually reached."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import T0, FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db

LINK = "/executions/sales/orders/4/jobs/sales.orders.1-a-to-b/bad-records/"


def _job_recording(owner, paths: list[str]) -> Client:
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, execution_id=4, started_at=T0)
    states = [{"task_id": "t0", "records_bad": 1, "bad_records_files": paths}]
    JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="COMMITTED", task_states=states
    )
    browser = Client()
    browser.force_login(owner)
    return browser


def test_a_recorded_path_naming_a_secret_file_is_not_served(owner, tmp_path):
    secret = tmp_path / "master.key"
    secret.write_text("the portal's master key")

    download = _job_recording(owner, [str(secret)]).get(LINK)

    assert download.status_code == 404
    assert b"master key" not in download.content


def test_a_bad_records_name_linked_to_a_secret_is_not_served(owner, tmp_path):
    secret = tmp_path / "master.key"
    secret.write_text("the portal's master key")
    lure = tmp_path / "lake" / "orders" / "_errors" / "4-t0.jsonl"
    lure.parent.mkdir(parents=True)
    lure.symlink_to(secret)

    download = _job_recording(owner, [str(lure)]).get(LINK)

    assert download.status_code == 404
    assert b"master key" not in download.content


def test_another_runs_bad_records_are_not_served_as_this_ones(owner, tmp_path):
    other = tmp_path / "lake" / "orders" / "_errors" / "5-t0.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"execution_id": 5, "record": "someone else's row"}) + "\n")

    assert _job_recording(owner, [str(other)]).get(LINK).status_code == 404


def test_the_err_folders_bad_records_of_this_run_are_served(owner, tmp_path):
    kept = tmp_path / "work" / "err" / "sales.orders.1-a-to-b" / "4" / "t0" / "bad_records.jsonl"
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps({"execution_id": 4, "record": "3,cid"}) + "\n")

    download = _job_recording(owner, [str(kept)]).get(LINK)

    assert download.status_code == 200
    assert b"".join(download.streaming_content) == kept.read_bytes()
