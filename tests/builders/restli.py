"""A Rest.li FlowConfig record the Gobblin clients' stories send."""

from __future__ import annotations


def flow_config(**overrides) -> dict:
    record = {
        "id": {"flowGroup": "team", "flowName": "nightly"},
        "schedule": {"cronSchedule": "0 0 2 * * ?", "runImmediately": False},
        "templateUris": "FS:///mytemplate.template",
        "properties": {
            "gobblin.flow.sourceIdentifier": "pg-sales",
            "gobblin.flow.destinationIdentifier": "lake",
            **RUNNABLE,
        },
    }
    record.update(overrides)
    return record


# What the JDBC source of pg-sales reads (a save refuses a flow the pipeline would refuse).
RUNNABLE = {"source.jdbc.tables": "orders", "extract.is.full": "true"}
