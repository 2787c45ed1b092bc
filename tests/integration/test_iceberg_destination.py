"""A flow saved through the API from a PostgreSQL table to an Iceberg destination, run by a real
worker: the rows land in the Iceberg table once, readable by pyiceberg, with the run's watermark in
the commit; the catalog (PostgreSQL, its role's password given as ENC(...)) keeps the password out of
every stored trace."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import uuid

import psycopg
import pytest
from rest_framework.test import APIClient

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.keys import services as keys
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    ExecutionStatus,
    JobExecution,
    JobStatus,
)
from portal.orchestration.state.commitstore import FailpointCrash, arm
from portal.orchestration.worker import executor
from portal.pipeline.destinations.iceberg import load_catalog
from portal.topology import services as topology
from tests.builders.queues import INGEST_QUEUE
from tests.builders.stack import finished
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def databases():
    """A source database with a table of readings, and a catalog database owned by a role with a
    password (the secret)."""
    suffix = uuid.uuid4().hex[:8]
    source, catalog, role = f"flowport_ice_src_{suffix}", f"flowport_ice_cat_{suffix}", f"lake_{suffix}"
    password = f"pw-{uuid.uuid4().hex}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{source}"')
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f'CREATE DATABASE "{catalog}" OWNER {role}')
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{source}", autocommit=True) as db:
        db.execute(
            "CREATE TABLE readings (id bigint PRIMARY KEY, station text NOT NULL, "
            "celsius numeric(5,2), taken_at timestamptz NOT NULL)"
        )
        db.execute(
            "INSERT INTO readings SELECT g, 'st-' || (g % 9), (g % 400) / 10.0 - 5, "
            "timestamptz '2025-01-01 00:00:00+00' + g * interval '1 minute' FROM generate_series(1, 2500) g"
        )
    yield {"source": source, "catalog": catalog, "role": role, "password": password}
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{source}" WITH (FORCE)')
        admin.execute(f'DROP DATABASE "{catalog}" WITH (FORCE)')
        admin.execute(f"DROP ROLE {role}")


def test_a_flow_saved_through_the_api_delivers_its_rows_to_an_iceberg_table(
    tmp_path, databases, worker, scheduler
):
    owner = UserFactory(username="iris")
    catalog_uri = f"postgresql+psycopg://{databases['role']}@127.0.0.1:5432/{databases['catalog']}"
    topology.create_data_node(
        {
            "name": "sensors",
            "kind": "jdbc",
            "properties": {
                "url": f"jdbc:postgresql://127.0.0.1:5432/{databases['source']}",
                "user": "postgres",
            },
        }
    )
    topology.create_data_node(
        {
            "name": "lakehouse",
            "kind": "iceberg",
            "properties": {"catalog.uri": catalog_uri, "warehouse": str(tmp_path / "warehouse")},
        }
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": INGEST_QUEUE},
        capabilities=[("sensors", "lakehouse")],
    )
    wrapped = keys.wrap_customer_key(user=owner, generate=True).customer_key.wrapped_key
    api = APIClient()
    api.force_authenticate(owner)
    body = {
        "flowGroup": "weather",
        "flowName": "readings",
        "source": "sensors",
        "destinations": ["lakehouse"],
        "paused": True,
        "properties": {
            "source.jdbc.tables": "readings",
            "extract.delta.fields": "taken_at",
            "extract.primary.key.fields": "id",
            "writer.iceberg.table": "readings",
            "writer.iceberg.catalog.password": keys.encrypt_value(wrapped, databases["password"]),
            "encrypt.wrapped.key": wrapped,
        },
    }
    created = api.post("/api/flowconfigs", body, format="json")
    assert created.status_code == 201, created.content[:600]
    flow = flow_services.set_paused(FlowConfig.objects.get(flow_group="weather", flow_name="readings"), False)

    execution = finished(services.run_now(flow, user=owner), timeout=240)
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    table = load_catalog(catalog_uri, databases["password"], str(tmp_path / "warehouse")).load_table(
        ("weather", "readings")
    )
    rows = table.scan().to_arrow().sort_by("id").to_pylist()
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{databases['source']}") as db:
        source = db.execute("SELECT id, station, celsius, taken_at FROM readings ORDER BY id").fetchall()
    assert [(r["id"], r["station"], r["celsius"], r["taken_at"]) for r in rows] == [tuple(s) for s in source]
    assert rows[0]["taken_at"] == dt.datetime(2025, 1, 1, 0, 1, tzinfo=dt.UTC)
    assert rows[4]["celsius"] == decimal.Decimal("-4.50")
    job = JobExecution.objects.get(execution=execution)
    state = DatasetState.objects.get(job_name=job.job_name, dataset_urn="readings")
    summary = table.current_snapshot().summary.additional_properties
    assert summary["flowport.watermark"] == state.watermark == "2025-01-02 17:40:00+00"
    assert summary["flowport.execution-id"] == str(execution.execution_id)
    assert job.processed_count == 2500

    # The next run delivers only the new rows, in a second commit.
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{databases['source']}", autocommit=True) as db:
        db.execute(
            "INSERT INTO readings SELECT g, 'st-new', 1.25, timestamptz '2025-02-01 00:00:00+00' + g * "
            "interval '1 second' FROM generate_series(2501, 2530) g"
        )
    second = finished(services.run_now(flow, user=owner), timeout=240)
    assert second.status == ExecutionStatus.COMMITTED, second.message
    table = table.refresh()
    assert table.scan().to_arrow().num_rows == 2530
    assert len(table.metadata.snapshots) == 2
    stored = json.dumps(
        [list(JobExecution.objects.values("task_states", "message", "log_excerpt"))], default=str
    )
    assert databases["password"] not in stored


def test_a_worker_dying_after_the_iceberg_commit_with_its_commit_log_lost_delivers_nothing_twice(
    tmp_path, databases, settings
):
    """The worker (in this process, real Spark) dies right after the Iceberg commit, before the
    state store's check-in; the commit-step log is then lost. The redelivered attempt starts where
    the table says, not where the empty state store does: every row lands once."""
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    owner = UserFactory(username="ivan")
    source_url = f"postgres://postgres@127.0.0.1:5432/{databases['source']}"
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    topology.create_data_node(
        {
            "name": "sensors",
            "kind": "jdbc",
            "properties": {
                "url": f"jdbc:postgresql://127.0.0.1:5432/{databases['source']}",
                "user": "postgres",
            },
        }
    )
    topology.create_data_node(
        {
            "name": "lakehouse",
            "kind": "iceberg",
            "properties": {"catalog.uri": catalog_uri, "warehouse": str(tmp_path / "warehouse")},
        }
    )
    topology.create_executor(
        {
            "name": "inproc",
            "technology": "spark-local",
            # In this process, like the crash harness's jobs: the master of its one Spark session.
            "spark_master": settings.SPARK_MASTER,
            "queue": "it.iceberg-inproc",
        },
        capabilities=[("sensors", "lakehouse")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "weather",
            "flow_name": "crash",
            "source": "sensors",
            "destinations": ["lakehouse"],
            "paused": True,
            "properties": {
                "source.jdbc.tables": "readings",
                "extract.delta.fields": "taken_at",
                "extract.primary.key.fields": "id",
            },
        },
    )
    execution = services.run_now(flow_services.set_paused(flow, False), user=owner)
    process_actions()
    job = execution.jobs.get()
    # Step 1 is the Iceberg commit, step 2 the watermark's check-in.
    with arm("after_step:1"), contextlib.suppress(FailpointCrash):
        executor.execute_job(job.pk, job.attempt, job.spec)
    table = load_catalog(catalog_uri, None, str(tmp_path / "warehouse")).load_table(("weather", "readings"))
    assert table.scan().to_arrow().num_rows == 2500
    assert not DatasetState.objects.filter(dataset_urn="readings", watermark__gt="").exists()
    pending = CommitStoreDataset.objects.filter(dataset_urn="readings")
    assert pending.count() == 1
    pending.delete()  # the commit-step log, lost

    with psycopg.connect(source_url, autocommit=True) as db:
        db.execute(
            "INSERT INTO readings SELECT g, 'st-late', 2.5, timestamptz '2025-03-01 00:00:00+00' + g * "
            "interval '1 second' FROM generate_series(2501, 2540) g"
        )
    JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.ORCHESTRATED, attempt=job.attempt + 1)
    job.refresh_from_db()
    assert executor.execute_job(job.pk, job.attempt, job.spec) == "committed"
    ids = table.refresh().scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(1, 2541))  # each row once
    state = DatasetState.objects.get(dataset_urn="readings")
    assert state.watermark == "2025-03-01 00:42:20+00"
    reasons = list(state.history.values_list("reason", flat=True))
    assert any("recovered from the Iceberg table" in r for r in reasons)
