"""Stories of OpenLineage events: each job attempt is a run with a START and one
end (COMPLETE, FAIL, ABORT), naming the datasets it read and wrote without credentials, with the
schema read and, for a plain copy, where each delivered column came from (dropped columns
absent, hashed ones masked). Events go to a file or an HTTP endpoint after the job's commit,
and an endpoint that is down or slow never holds a job up."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import DatasetState, JobExecution, JobStatus, LineageEdge
from portal.orchestration.state import lineage
from portal.orchestration.worker import executor
from tests.factories import FlowConfigFactory
from tests.lineage_check import validated
from tests.unit.orchestration.factories import two_hop_flow
from tests.unit.topology.helpers import executor as make_executor
from tests.unit.topology.helpers import nodes

pytestmark = pytest.mark.django_db

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": False, "metadata": {}},
            {"name": "email", "type": "string", "nullable": True, "metadata": {}},
            {"name": "ssn", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
STATES = [{"dataset_urn": "customers", "source_schema": SCHEMA, "status": "SUCCEEDED"}]


@pytest.fixture
def events_file(settings, tmp_path):
    settings.OPENLINEAGE_FILE = str(tmp_path / "lineage.jsonl")
    settings.OPENLINEAGE_URL = ""
    return tmp_path / "lineage.jsonl"


def read_events(path) -> list[dict]:
    assert lineage.sender().wait(10)
    return [validated(line) for line in path.read_text().splitlines()] if path.exists() else []


def first_job(owner, **properties) -> JobExecution:
    flow = two_hop_flow(owner, properties={"source.files.format": "csv", **properties})
    services.run_now(flow, user=owner)
    process_actions()
    return JobExecution.objects.get(hop_index=1)


def run(job: JobExecution, status: str, capture, **fields) -> None:
    with capture(execute=True):
        claimed = executor.claim(job.pk, job.attempt, "test-worker")
        assert claimed is not None
    with capture(execute=True):
        executor.report(claimed, job.attempt, status, **fields)


def test_a_committed_job_tells_its_start_and_completion_with_datasets_schema_and_column_lineage(
    owner, events_file, django_capture_on_commit_callbacks
):
    job = first_job(
        owner, **{"columns.drop": "ssn", "columns.hash": "email", "columns.hash.secret": "ENC(x)"}
    )
    run(job, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES, message="ok")
    start, complete = read_events(events_file)
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"]  # one run: this attempt
    assert complete["job"] == {
        **complete["job"],
        "namespace": "flowport",
        "name": job.job_name,
    }
    assert complete["run"]["facets"]["parent"]["job"]["name"] == "demo.a-to-c"
    [source] = complete["inputs"]
    [target] = complete["outputs"]
    assert source["namespace"] == "file" and source["name"].endswith("var/data/a")
    assert target["namespace"] == "file" and target["name"].endswith("var/data/b/demo/a-to-c")
    assert [f["name"] for f in source["facets"]["schema"]["fields"]] == ["id", "email", "ssn"]
    # ssn is dropped: not delivered, so neither in the output's schema nor in its lineage.
    assert [(f["name"], f["type"]) for f in target["facets"]["schema"]["fields"]] == [
        ("id", "long"),
        ("email", "string"),
    ]
    columns = target["facets"]["columnLineage"]["fields"]
    assert set(columns) == {"id", "email"}
    [id_from] = columns["id"]["inputFields"]
    assert (id_from["name"], id_from["field"]) == (source["name"], "id")
    assert id_from["transformations"] == [{"type": "DIRECT", "subtype": "IDENTITY", "masking": False}]
    [email_from] = columns["email"]["inputFields"]
    assert email_from["transformations"][0]["masking"] is True
    assert "columns.hash" in email_from["transformations"][0]["description"]
    edge = LineageEdge.objects.get()
    assert (edge.source_name, edge.target_name, edge.job_name) == (
        source["name"],
        target["name"],
        job.job_name,
    )


def test_a_failed_and_a_cancelled_run_end_with_fail_and_abort(
    owner, events_file, django_capture_on_commit_callbacks
):
    job = first_job(owner)
    run(job, JobStatus.FAILED, django_capture_on_commit_callbacks, message="RuntimeError: the disk is full")
    JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.ORCHESTRATED, status_rank=1, attempt=2)
    job.refresh_from_db()
    run(job, JobStatus.CANCELLED, django_capture_on_commit_callbacks, message="Cancelled; nothing published.")
    events = read_events(events_file)
    assert [e["eventType"] for e in events] == ["START", "FAIL", "START", "ABORT"]
    assert events[1]["run"]["facets"]["errorMessage"]["message"] == "RuntimeError: the disk is full"
    assert events[0]["run"]["runId"] == events[1]["run"]["runId"] != events[2]["run"]["runId"]
    assert not LineageEdge.objects.exists()  # only a committed run says what feeds what


def test_a_jdbc_dataset_is_named_without_its_credentials():
    dataset = lineage.jdbc_dataset(
        "jdbc:postgresql://scott:tiger@db.example:5433/sales?password=tiger", "public.orders"
    )
    assert dataset == lineage.Dataset("postgres://db.example:5433", "sales.public.orders")
    maria = lineage.jdbc_dataset("jdbc:mariadb://db:3306/shop;user=root;password=pw", "items")
    assert maria == lineage.Dataset("mysql://db:3306", "shop.items")
    assert lineage.file_dataset("s3a://key:secret@bucket/lake/x/") == lineage.Dataset("s3://bucket", "lake/x")


class Slow(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(float(self.server.delay))  # type: ignore[attr-defined]
        Slow.received.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": json.loads(body)}
        )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.delay = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Slow.received.clear()
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = f"http://127.0.0.1:{server.server_address[1]}"
    settings.OPENLINEAGE_API_KEY = "k-123"
    settings.OPENLINEAGE_TIMEOUT_SECONDS = 1
    yield server
    server.shutdown()


def test_events_are_posted_to_the_endpoint_and_a_slow_one_holds_no_job_up(
    owner, endpoint, django_capture_on_commit_callbacks
):
    endpoint.delay = 3  # each answer takes longer than the 1 s timeout
    job = first_job(owner)
    began = time.monotonic()
    run(job, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES)
    assert time.monotonic() - began < 1.0  # the job's claim and report did not wait for it
    assert lineage.sender().wait(15)
    endpoint.delay = 0
    JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.ORCHESTRATED, status_rank=1, attempt=2)
    job.refresh_from_db()
    run(job, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES)
    assert lineage.sender().wait(15)
    arrived = [
        r
        for r in Slow.received
        if r["body"]["run"]["runId"]
        == lineage.run_id("demo", "a-to-c", job.execution.execution_id, job.job_name, 2)
    ]
    assert [r["body"]["eventType"] for r in arrived] == ["START", "COMPLETE"]
    assert {(r["path"], r["auth"]) for r in arrived} == {("/api/v1/lineage", "Bearer k-123")}
    for r in arrived:
        validated(r["body"])


def test_an_endpoint_that_is_down_fails_nothing(owner, settings, django_capture_on_commit_callbacks):
    settings.OPENLINEAGE_URL, settings.OPENLINEAGE_FILE = "http://127.0.0.1:9", ""  # nothing listens
    job = first_job(owner)
    failed_before = lineage.sender().failed
    run(job, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES)
    assert lineage.sender().wait(15)
    job.refresh_from_db()
    assert job.status == JobStatus.COMMITTED
    assert lineage.sender().failed == failed_before + 2  # logged, counted, never raised


def test_the_dataset_page_tells_what_feeds_the_dataset_and_what_it_feeds_hop_by_hop(
    owner, events_file, django_capture_on_commit_callbacks
):
    first = first_job(owner)
    run(first, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES)
    second = JobExecution.objects.get(hop_index=2)
    JobExecution.objects.filter(pk=second.pk).update(status=JobStatus.ORCHESTRATED, status_rank=1)
    second.refresh_from_db()
    run(second, JobStatus.COMMITTED, django_capture_on_commit_callbacks, task_states=STATES)
    state = DatasetState.objects.create(
        flow_id=first.execution.flow_id,
        flow_group="demo",
        flow_name="a-to-c",
        job_name=first.job_name,
        dataset_urn="customers",
    )
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/monitoring/datasets/demo/a-to-c/{first.job_name}/customers/").content.decode()
    assert 'id="lineage"' in page
    feeds = page[page.index('data-test="feeds"') :]
    feeds = feeds[: feeds.index("</ul>")]
    # a → b by the first hop, then b → c by the second: both told, in that order.
    assert feeds.index("var/data/b/demo/a-to-c") < feeds.index("var/data/c/demo/a-to-c")
    assert first.job_name in feeds and second.job_name in feeds
    assert "No recorded run writes it" in page  # nothing in the portal writes a
    staff = Client()
    staff.force_login(type(owner).objects.create(username="root", is_staff=True))
    assert 'data-test="feeds"' in staff.get(f"/state/{state.pk}/").content.decode()


@pytest.mark.postgres  # SQLite stores a text longer than its column: nothing to refuse
def test_a_lineage_record_the_database_refuses_leaves_the_job_committed(
    owner, events_file, django_capture_on_commit_callbacks
):
    """A table name longer than the edge's column (a database error inside the report's
    transaction) is rolled back to a savepoint and logged: the job's own commit stands."""
    nodes("db", kind="jdbc")
    nodes("out")
    make_executor("xj", "db>out")
    flow = FlowConfigFactory(
        owner=owner, flow_group="demo", flow_name="db-to-out", schedule="", source="db", destinations=["out"]
    )
    services.run_now(flow, user=owner)
    process_actions()
    job = JobExecution.objects.get(execution__flow_name="db-to-out")
    long_table = "t" * 600
    run(
        job,
        JobStatus.COMMITTED,
        django_capture_on_commit_callbacks,
        task_states=[{"dataset_urn": long_table}],
    )
    job.refresh_from_db()
    assert job.status == JobStatus.COMMITTED
    assert not LineageEdge.objects.exists()
    assert [e["eventType"] for e in read_events(events_file)] == ["START"]  # the COMPLETE could not be made
