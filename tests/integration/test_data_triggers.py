"""Two flows chained by a dataset, end to end: numbers land in the lake (the upstream flow, run
now), and the flow waiting for that dataset starts by itself when it commits and copies it into
the archive — a real scheduler process, the Redis broker, a real Celery worker and real Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.flows.triggers import services as trigger_services
from portal.orchestration import services
from portal.orchestration.models import ExecutionStatus, FlowExecution
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


def create(name: str, source: str, destination: str, properties: dict[str, str]):
    flow = flow_services.create_flow(
        owner=User.objects.get_or_create(username="olivia")[0],
        data={
            "flow_group": "it",
            "flow_name": name,
            "schedule": "",
            "source": source,
            "destinations": [destination],
            "properties": properties,
            "paused": True,  # no schedule runs once on save: saved off, then on (which runs nothing)
        },
    )
    return flow_services.set_paused(flow, False)


def finished(execution: FlowExecution, timeout: float = 120) -> FlowExecution:
    def done():
        execution.refresh_from_db()
        return execution.status in {"COMMITTED", "FAILED", "CANCELLED", "SKIPPED"}

    wait_until(done, timeout, f"execution {execution.execution_id} to finish")
    return execution


def ids_in(folder: Path) -> list[int]:
    return sorted(
        json.loads(line)["id"]
        for path in folder.rglob("*.json")
        for line in path.read_text().splitlines()
        if line.strip()
    )


def test_a_commit_upstream_starts_the_downstream_flow_which_copies_the_new_dataset(lake, worker, scheduler):
    numbers = create(
        "numbers",
        "landing",
        "lake",
        {
            "source.class": "tests.integration.sources.CountingSource",
            "writer.output.format": "json",
            "numbers.per.run": "10",
        },
    )
    archive = create(
        "archive-numbers",
        "lake",
        "archive",
        {
            "source.files.format": "json",
            "source.files.datasets": "it",  # the lake's it/ folder: it/numbers/ is the upstream's
            "writer.output.format": "json",
        },
    )
    trigger_services.save_settings(archive, {"upstream": ["it/numbers"]})

    upstream = finished(services.run_now(numbers, user=numbers.owner))
    assert upstream.status == ExecutionStatus.COMMITTED, upstream.message

    downstream = wait_until(
        lambda: FlowExecution.objects.filter(flow=archive, trigger=FlowExecution.Trigger.DATA).first(),
        30,
        "the downstream execution",
    )
    assert downstream.requested_by == f"data: it/numbers#{upstream.execution_id} committed"
    downstream = finished(downstream)
    assert downstream.status == ExecutionStatus.COMMITTED, downstream.message
    assert ids_in(lake / "archive" / "it" / "archive-numbers") == list(range(1, 11))

    # Its next commit brings the next ten, and the archive follows by itself again.
    second = finished(services.run_now(numbers, user=numbers.owner))
    assert second.status == ExecutionStatus.COMMITTED, second.message
    again = wait_until(
        lambda: (
            FlowExecution.objects.filter(flow=archive, trigger=FlowExecution.Trigger.DATA)
            .exclude(pk=downstream.pk)
            .first()
        ),
        30,
        "the second downstream execution",
    )
    assert finished(again).status == ExecutionStatus.COMMITTED, again.message
    assert ids_in(lake / "archive" / "it" / "archive-numbers") == list(range(1, 21))
