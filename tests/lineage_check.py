"""Checking an emitted OpenLineage event, for the lineage stories.

openlineage-python 1.54 ships the event and facet classes but not the spec's JSON schema files
(OpenLineage.json and the facets' schemas are not in the wheel), and the tests run offline. So an
event is validated with the client's own typed classes: rebuilt from its JSON through them (their
attrs validators check the run id is a UUID, the event time an ISO date-time, the event type
one of the spec's), serialized back with the client's Serde, and compared with what was emitted:
any key the spec does not know, or a value of the wrong shape, makes the two differ."""

from __future__ import annotations

import json
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    parent_run,
    schema_dataset,
)
from openlineage.client.serde import Serde

BASE = ("_producer", "_schemaURL")


def _base(facet: dict[str, Any]) -> dict[str, Any]:
    assert facet["_producer"] and facet["_schemaURL"].startswith("https://openlineage.io/spec/"), facet
    return {k: v for k, v in facet.items() if k not in BASE}


def _dataset_facets(facets: dict[str, Any]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for name, facet in facets.items():
        body = _base(facet)
        if name == "schema":
            typed[name] = schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(**field) for field in body.pop("fields")],
                **body,
            )
        elif name == "columnLineage":
            typed[name] = column_lineage_dataset.ColumnLineageDatasetFacet(
                fields={
                    column: column_lineage_dataset.Fields(
                        inputFields=[
                            column_lineage_dataset.InputField(
                                namespace=f["namespace"],
                                name=f["name"],
                                field=f["field"],
                                transformations=[
                                    column_lineage_dataset.Transformation(**t)
                                    for t in f.get("transformations", [])
                                ],
                            )
                            for f in spec["inputFields"]
                        ]
                    )
                    for column, spec in body.pop("fields").items()
                },
                **{k: v for k, v in body.items() if k != "dataset"},
            )
        else:
            raise AssertionError(f"a dataset facet these stories do not expect: {name}")
    return typed


def _run_facets(facets: dict[str, Any]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for name, facet in facets.items():
        body = _base(facet)
        if name == "parent":
            typed[name] = parent_run.ParentRunFacet(
                run=parent_run.Run(**body["run"]), job=parent_run.Job(**body["job"])
            )
        elif name == "errorMessage":
            typed[name] = error_message_run.ErrorMessageRunFacet(**body)
        else:
            raise AssertionError(f"a run facet these stories do not expect: {name}")
    return typed


def validated(line: str | dict[str, Any]) -> dict[str, Any]:
    """The event as a dict, once the client's classes accept it whole (see the module docstring)."""
    event = json.loads(line) if isinstance(line, str) else line
    job_facets = {
        name: job_type_job.JobTypeJobFacet(**_base(facet))
        for name, facet in event["job"].get("facets", {}).items()
    }
    typed = RunEvent(
        eventType=RunState(event["eventType"]),
        eventTime=event["eventTime"],
        run=Run(runId=event["run"]["runId"], facets=_run_facets(event["run"].get("facets", {}))),
        job=Job(namespace=event["job"]["namespace"], name=event["job"]["name"], facets=job_facets),
        inputs=[
            InputDataset(
                namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d.get("facets", {}))
            )
            for d in event.get("inputs", [])
        ],
        outputs=[
            OutputDataset(
                namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d.get("facets", {}))
            )
            for d in event.get("outputs", [])
        ],
        producer=event["producer"],
    )
    assert event["schemaURL"].startswith("https://openlineage.io/spec/")
    assert json.loads(Serde.to_json(typed)) == event
    return event
