"""The attacker's world: two teams on one portal, each with its own flow.

`victor` owns the flow team-v/orders and a customer key; `mallory` is an
ordinary account (no staff, no groups) with a flow of her own, mal/grab, over
the same data nodes. Every story asks whether mallory can reach what is not
hers, once at save (the web tier) and once on the worker, which gets a JobSpec
the orchestrator bound for her flow and then tampered the way an attacker who
controls the message would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from portal.crypto import client
from portal.crypto.master import create_ring_file
from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig, FlowGroup
from portal.keys import services
from portal.orchestration.control.jobspecs import build_jobspec
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.orchestration.worker import executor
from portal.topology import services as topology
from tests.conftest import api_client_for
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor as make_executor

SECRET = "victors-db-password"


@dataclass
class World:
    tmp: Path
    victor: Any
    mallory: Any
    landing: Path
    lake: Path
    master_key: Path
    victor_key: Any
    victor_flow: FlowConfig
    mallory_flow: FlowConfig
    written: list[Path] = field(default_factory=list)

    def api(self, user: Any = None):
        return api_client_for(user or self.mallory)

    def post_flow(self, properties: dict[str, str], user: Any = None, **fields: Any):
        body = {
            "flowGroup": "mal",
            "flowName": "other",
            "source": "landing",
            "destinations": ["lake"],
            "properties": {"source.files.format": "csv", **properties},  # what the files source reads
            **fields,
        }
        return self.api(user).post("/api/flowconfigs", body, format="json")

    def bound_spec(self, flow: FlowConfig | None = None) -> tuple[FlowExecution, dict[str, Any]]:
        """The JobSpec the orchestrator binds for the flow's single hop."""
        flow = flow or self.mallory_flow
        compiled = compile_flow(flow).to_dict()
        assert compiled["status"] == "COMPILED", compiled["message"]
        jobs = {j["jobName"]: j for j in compiled["jobs"]}
        plan = compiled["jobs"][0]
        execution = FlowExecution.objects.create(
            flow=flow,
            flow_group=flow.flow_group,
            flow_name=flow.flow_name,
            execution_id=FlowExecution.objects.count() + 1,
            trigger=FlowExecution.Trigger.RUN_NOW,
        )
        return execution, build_jobspec(execution, plan, jobs)

    def run_on_worker(self, spec: dict[str, Any], execution: FlowExecution) -> JobExecution:
        """The worker's execute_job, in-process, on a job whose message carries `spec`."""
        job = JobExecution.objects.create(
            execution=execution,
            job_name=spec["job_name"],
            job_group=execution.flow_group,
            executor="x1",
            queue="executor.x1",
            spec=spec,
            status=JobStatus.ORCHESTRATED,
            attempt=1,
        )
        executor.execute_job(job.pk, 1, spec)
        job.refresh_from_db()
        return job


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


@pytest.fixture
def world(db, tmp_path, settings) -> World:
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"  # production's default
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    secrets_dir = tmp_path / "portal-secrets"
    secrets_dir.mkdir()
    master_key = secrets_dir / "master-key"
    create_ring_file(master_key)
    settings.FLOWPORT_MASTER_KEY_FILE = str(master_key)
    settings.FLOWPORT_MASTER_KEY = ""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (landing / "orders").mkdir(parents=True)
    (landing / "orders" / "part-1.csv").write_text("id,amount\n1,10\n")
    victim_out = lake / "team-v" / "orders" / "orders"
    victim_out.mkdir(parents=True)
    (victim_out / "part-0.csv").write_text("id,amount\n1,10\n")
    victor, mallory = UserFactory(username="victor"), UserFactory(username="mallory")
    grants = [{"role": role, "user": u} for u in ("victor", "mallory") for role in ("read", "write")]
    for name, path in (("landing", landing), ("lake", lake)):
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(path)}, "acl": grants}
        )
    # The process has one SparkSession (orchestration.worker.sparkctx): the suite's master, as every other
    # in-process worker story uses, whichever of them starts it first.
    make_executor("x1", "landing>lake", spark_master=settings.SPARK_MASTER)

    victor_key = services.wrap_customer_key(
        user=victor, key=client.encode_key(client.generate_key()), label="db"
    ).customer_key
    FlowGroup.objects.create(name="team-v", owner_user=victor)
    FlowGroup.objects.create(name="mal", owner_user=mallory)
    victor_flow = FlowConfig.objects.create(
        flow_group="team-v",
        flow_name="orders",
        owner=victor,
        source="landing",
        destinations=["lake"],
        properties={
            "source.files.format": "csv",
            "source.conn.password": services.encrypt_value(victor_key.wrapped_key, SECRET),
            "encrypt.wrapped.key": victor_key.wrapped_key,
        },
    )
    mallory_flow = FlowConfig.objects.create(
        flow_group="mal",
        flow_name="grab",
        owner=mallory,
        source="landing",
        destinations=["lake"],
        properties={"source.files.format": "csv", "writer.output.format": "csv"},
    )
    return World(tmp_path, victor, mallory, landing, lake, master_key, victor_key, victor_flow, mallory_flow)
