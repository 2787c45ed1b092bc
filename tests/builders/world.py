"""The attacker's world: two teams on one portal, each with its own flow.

`victor` owns the flow team-v/orders and a customer key; `mallory` is an
ordinary account (no staff, no groups) with a flow of her own, mal/grab, over
the same data nodes. Every story asks whether mallory can reach what is not
hers, once at save (the web tier) and once on the worker, which gets a JobSpec
the orchestrator bound for her flow and then tampered the way an attacker who
controls the message would. The `world` fixture (tests/security/conftest.py)
makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.orchestration.control.jobspecs import build_jobspec
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.orchestration.worker import executor
from tests.builders.api import api_client_for

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
