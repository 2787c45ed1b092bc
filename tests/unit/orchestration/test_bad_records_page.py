"""The execution page of a job whose source had records it could not read: the count, and the
records themselves as a download (reason, file, line, run), for the people who may see it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import T0, FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db


def test_the_page_shows_the_bad_records_and_links_to_them(owner, tmp_path):
    published = tmp_path / "lake" / "orders" / "_errors" / "4-t0.jsonl"
    published.parent.mkdir(parents=True)
    row = {
        "source_file": "/drop/orders/a.csv",
        "line": 4,
        "reason": "2 field(s), expected 3",
        "record": "3,cid",
    }
    published.write_text(json.dumps({"execution_id": 4, **row}) + "\n")
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, execution_id=4, started_at=T0)
    states = [{"task_id": "t0", "records_bad": 1, "bad_records_files": [str(published)]}]
    JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="COMMITTED", task_states=states
    )
    browser = Client()
    browser.force_login(owner)

    page = browser.get("/executions/sales/orders/4/").content.decode()

    assert "<dt>Bad records</dt>" in page and "1 set aside" in page
    link = "/executions/sales/orders/4/jobs/sales.orders.1-a-to-b/bad-records/"
    assert f'href="{link}"' in page
    download = browser.get(link)
    assert download.status_code == 200
    assert (
        download["Content-Disposition"] == 'attachment; filename="4-sales.orders.1-a-to-b-bad-records.jsonl"'
    )
    assert [json.loads(line) for line in b"".join(download.streaming_content).splitlines()] == [
        {"execution_id": 4, **row}
    ]

    # Someone who may see the execution but not act on it sees the count, not the records.
    stranger = Client()
    stranger.force_login(UserFactory())
    seen = stranger.get("/executions/sales/orders/4/")
    if seen.status_code == 200:
        assert "1 set aside" in seen.content.decode() and link not in seen.content.decode()
    assert stranger.get(link).status_code in (403, 404)


def test_a_job_without_bad_records_says_nothing_of_them(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, execution_id=5, started_at=T0)
    JobExecutionFactory(execution=execution, job_name="sales.orders.1-a-to-b", status="COMMITTED")
    browser = Client()
    browser.force_login(owner)

    assert "Bad records" not in browser.get("/executions/sales/orders/5/").content.decode()
    assert (
        browser.get("/executions/sales/orders/5/jobs/sales.orders.1-a-to-b/bad-records/").status_code == 404
    )


def test_bad_records_in_an_error_table_are_named_where_they_are_without_a_dead_download(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, execution_id=6, started_at=T0)
    table = "table bad_orders_errors (postgresql db:5432/sales)"
    states = [
        {"task_id": "t0", "records_bad": 2, "bad_records_files": [], "bad_records_tables": [table]},
        {"task_id": "t1", "records_bad": 1, "bad_records_files": [], "bad_records_tables": [table]},
    ]
    JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="COMMITTED", task_states=states
    )
    browser = Client()
    browser.force_login(owner)

    page = browser.get("/executions/sales/orders/6/").content.decode()

    assert "3 set aside" in page
    assert f'in <span data-test="bad-records-table">{table}</span>' in page  # once, for both tasks
    assert page.count('data-test="bad-records-table"') == 1
    assert "/jobs/sales.orders.1-a-to-b/bad-records/" not in page  # nothing on disk to download
