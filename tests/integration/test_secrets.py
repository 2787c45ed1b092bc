"""Secrets stay secret end to end. A flow reads a real PostgreSQL source as
a user whose name and password are ENC(...) values; only the worker, in
memory, decrypts them. Then the run's every trace — the database dump, the
process and job logs, every command the broker saw, API responses, pages and
the Spark event log — is searched for the plaintext: it is nowhere."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.flows import services as flow_services
from portal.keys import services as keys
from portal.orchestration import services
from portal.orchestration.models import ExecutionStatus
from portal.topology import services as topology
from tests.builders.stack import finished
from tests.factories import UserFactory
from tests.integration.stack import (
    Proc,
    process_env,
    relay_through,
    shared_database_url,
    start_redis,
    start_scheduler,
    start_worker,
)
from tests.pg_logical import private_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def secret_source():
    """A source database readable only as a role whose name and password are the secrets, on a
    server that asks every login for its password: a flow's own login on a node without an
    account must prove it (portal.pipeline.usernode.FLOW_LOGIN)."""
    marker = f"s3cret-{uuid.uuid4().hex}"
    role = f"reader_{uuid.uuid4().hex[:10]}"
    database = f"flowport_leak_{uuid.uuid4().hex[:8]}"
    with private_server(password=True) as admin_url:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{marker}'")
        with psycopg.connect(admin_url.rsplit("/", 1)[0] + f"/{database}", autocommit=True) as db:
            db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)")
            db.execute("INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 7) g")
            db.execute(f"GRANT SELECT ON customers TO {role}")
        server = admin_url.rsplit("@", 1)[1].split("/")[0]
        yield {"marker": marker, "role": role, "database": database, "server": server}


def search(texts: dict[str, str], *secrets: str) -> list[str]:
    return [
        f"{secret[:10]}… in {where}" for where, text in texts.items() for secret in secrets if secret in text
    ]


def folder_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_secret_reaches_the_source_and_appears_nowhere_else(
    tmp_path, stack_dir, secret_source, monkeypatch
):
    marker, role = secret_source["marker"], secret_source["role"]
    owner = UserFactory(username="olivia")
    event_log = tmp_path / "spark-events"
    event_log.mkdir()
    (tmp_path / "lake").mkdir()
    topology.create_data_node(
        {
            "name": "crm",
            "kind": "jdbc",
            "properties": {"url": f"jdbc:postgresql://{secret_source['server']}/{secret_source['database']}"},
        }
    )
    topology.create_data_node(
        {"name": "lake", "kind": "files", "properties": {"path": str(tmp_path / "lake")}}
    )
    topology.create_executor(
        {
            "name": "leak",
            "technology": "spark-local",
            "spark_master": "local[2]",
            "queue": "it.leak",
            "spark_conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{event_log}"},
        },
        capabilities=[("crm", "lake")],
    )
    wrapped = keys.wrap_customer_key(user=owner, generate=True).customer_key.wrapped_key
    encrypted_password = keys.encrypt_value(wrapped, marker)
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "leak",
            "flow_name": "customers",
            "source": "crm",
            "destinations": ["lake"],
            "properties": {
                "source.jdbc.tables": "customers",
                "extract.is.full": "true",
                "extract.primary.key.fields": "id",
                "source.conn.username": keys.encrypt_value(wrapped, role),
                "source.conn.password": encrypted_password,
                "encrypt.wrapped.key": wrapped,
                "writer.output.format": "json",
            },
            "paused": True,  # no schedule = run once on save; the story runs it itself
        },
    )
    flow = flow_services.set_paused(flow, False)

    redis_proc, port = start_redis(stack_dir / "logs")
    broker_capture = stack_dir / "logs" / f"broker-monitor-{port}.log"
    monitor = Proc(broker_capture.stem, ["redis-cli", "-p", str(port), "MONITOR"], {}, stack_dir / "logs")
    relay_through(monkeypatch, f"redis://127.0.0.1:{port}/0")
    env = process_env(stack_dir / "var-leak", f"redis://127.0.0.1:{port}/0")
    worker = start_worker("leak-worker", ["it.leak"], env, stack_dir / "logs")
    scheduler = start_scheduler("leak-scheduler", env, stack_dir / "logs")
    try:
        execution = finished(services.run_now(flow, user=owner), timeout=180)
    finally:
        scheduler.stop()
        worker.stop()
        monitor.stop()
        redis_proc.stop()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    names = []
    for path in sorted((tmp_path / "lake").rglob("*.json")):
        names.extend(json.loads(line)["name"] for line in path.read_text().splitlines() if line.strip())
    assert sorted(names) == sorted(f"customer {n}" for n in range(1, 8))

    api = APIClient()
    api.force_authenticate(owner)
    page = Client()
    page.force_login(owner)
    execution_path = f"/executions/leak/customers/{execution.execution_id}/"
    dump = subprocess.run(
        ["pg_dump", "--data-only", shared_database_url()], capture_output=True, text=True, check=True
    ).stdout
    texts = {
        "database dump": dump,
        "process logs": folder_text(stack_dir / "logs"),
        "job logs": folder_text(stack_dir / "var-leak" / "logs"),
        "Spark event log": folder_text(event_log),
        "flow API": api.get("/api/flowconfigs/leak/customers").content.decode(),
        "status API": api.get("/api/flowstatuses/leak/customers").content.decode(),
        "execution API": api.get(f"/api/flowexecutions/{execution.execution_id}").content.decode(),
        "keys API": api.get("/api/keys").content.decode(),
        "flow page": page.get("/flows/leak/customers/").content.decode(),
        "execution page": page.get(execution_path).content.decode(),
        "dashboard": page.get("/monitoring/").content.decode(),
    }
    assert all(texts.values()), [k for k, v in texts.items() if not v]
    # The searches can find things: the ciphertext is stored, the broker carried the job.
    assert encrypted_password in dump
    assert "flowport.run_job" in texts["process logs"]
    assert folder_text(event_log), "Spark wrote no event log"
    assert search(texts, marker, role) == []
