"""Flows on the real stack (scheduler, Celery workers) and waiting for their executions:
what tests/integration's stories share."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.orchestration.models import (
    FlowExecution,
)
from portal.topology import services as topology
from tests.integration.stack import (
    wait_until,
)

SOURCE = "tests.integration.sources.CountingSource"


def make_flow(destination: str = "lake", schedule: str = "", name: str = "", **properties: str):
    props = {"source.class": SOURCE, "writer.output.format": "json", "numbers.per.run": "10", **properties}
    if "fork.branches" in properties:  # each branch names its own format
        props.pop("writer.output.format")
    # No schedule = run once, as soon as it is saved (Gobblin): created switched off so the save runs
    # nothing, then switched on (which runs nothing either); the test runs it itself.
    flow = flow_services.create_flow(
        owner=User.objects.get_or_create(username="olivia")[0],
        data={
            "flow_group": "it",
            "flow_name": name or f"numbers-to-{destination}",
            "schedule": schedule,
            "source": "landing",
            "destinations": [destination],
            "properties": props,
            "paused": not schedule,
        },
    )
    return flow_services.set_paused(flow, False)


def finished(execution: FlowExecution, timeout: float = 90) -> FlowExecution:
    def done():
        execution.refresh_from_db()
        return execution.status in {"COMMITTED", "FAILED", "CANCELLED", "SKIPPED"}

    wait_until(done, timeout, f"execution {execution.execution_id} to finish")
    return execution


def published_ids(folder: Path) -> list[int]:
    ids: list[int] = []
    for path in sorted(folder.rglob("*.json")):
        ids.extend(json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip())
    return sorted(ids)


def crash_topology(tmp_path, queue: str) -> None:
    for name in ("landing", "lake"):
        (tmp_path / name).mkdir(exist_ok=True)
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": queue},
        capabilities=[("landing", "lake")],
    )


User = get_user_model()
