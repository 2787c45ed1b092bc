"""Every record through the .pdl field lists (tests/unit/restli/pegasus.py):
what Flowport writes is a valid instance of Gobblin's schema and uses every
field the schema has (but the two Flowport never sets), and a FlowConfig read
back and written again comes back the same."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from portal.orchestration.models import ExecutionStatus, JobStatus
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory
from tests.unit.restli.pegasus import RECORDS, problems

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("packs")]

NEVER_SET = {("JobStatus", "jobTag"), ("JobStatus", "metrics")}  # Flowport has no job tags or metrics


def fields_used(value, kind, used: set[tuple[str, str]]) -> None:
    """Collect (record, field) pairs present in `value` of pdl type `kind`."""
    if isinstance(kind, tuple):
        if kind[0] == "array":
            for item in value:
                fields_used(item, kind[1], used)
        return
    if kind not in RECORDS:
        return
    for name, (field_kind, _required) in RECORDS[kind].items():
        if name in value:
            used.add((kind, name))
            fields_used(value[name], field_kind, used)


def test_a_flow_config_read_back_and_written_again_is_unchanged(owner, wire):
    team = Group.objects.create(name="data-eng")
    owner.groups.add(team)
    record = {
        "id": {"flowGroup": "team", "flowName": "nightly"},
        "schedule": {"cronSchedule": "0 0 2 ? * MON-FRI", "runImmediately": False},
        "templateUris": "FS:///mytemplate.template",
        "owningGroup": "data-eng",
        "properties": {
            "a": "1",
            "b.c": "2",
            "gobblin.flow.sourceIdentifier": "lake",
            "gobblin.flow.destinationIdentifier": "archive",
            "source.files.format": "csv",
        },
    }
    key = "/flowconfigsV2/($params:(),flowGroup:team,flowName:nightly)"
    assert wire.send("POST", "/flowconfigsV2", record, "create").status_code == 201
    first = wire.send("GET", key).json()
    assert first == record
    assert wire.send("PUT", key, first, "update").status_code == 200
    assert wire.send("GET", key).json() == record


def test_every_record_uses_every_field_of_its_schema(owner, wire):
    team = Group.objects.create(name="data-eng")
    owner.groups.add(team)
    flow = FlowConfigFactory(flow_group="team", flow_name="nightly", owner=owner, owning_group=team)
    failed = FlowExecutionFactory(flow=flow, status=ExecutionStatus.FAILED, message="hop 1 failed")
    JobExecutionFactory(
        execution=failed,
        job_name="team.nightly.1-a-to-b",
        status=JobStatus.FAILED,
        message="boom",
        started_at=failed.started_at,
        ended_at=failed.started_at + timedelta(minutes=1),
        processed_count=7,
        low_watermark="1",
        high_watermark="2",
    )
    explained = wire.send(
        "POST",
        "/flowconfigsV2",
        {
            "id": {"flowGroup": "team", "flowName": "preview"},
            "schedule": {"cronSchedule": "0 0 * * * ?", "runImmediately": True},
            "templateUris": "FS:///mytemplate.template",
            "owningGroup": "data-eng",
            "properties": {},
            "explain": True,
        },
        "create",
    ).json()
    execution_key = f"($params:(),flowExecutionId:{failed.execution_id},flowGroup:team,flowName:nightly)"
    execution = wire.send("GET", f"/flowexecutions/{execution_key}").json()
    status = wire.send("GET", f"/flowstatuses/{execution_key}").json()

    used: set[tuple[str, str]] = set()
    for value, kind in ((explained, "FlowConfig"), (execution, "FlowExecution"), (status, "FlowStatus")):
        assert problems(value, kind) == [], kind
        fields_used(value, kind, used)
    reachable = {(record, name) for record in RECORDS for name in RECORDS[record]}
    assert reachable - used == NEVER_SET
