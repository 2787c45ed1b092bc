"""The field lists of Gobblin's Pegasus records, transcribed from Apache
Gobblin's gobblin-restli/gobblin-flow-config-service/gobblin-flow-config-service-api/
src/main/pegasus/org/apache/gobblin/service/*.pdl (Apache License 2.0), and a
checker that a JSON value is a valid instance: every field known, every
required field present, every value of its type. Required means neither
`optional` nor given a default in the .pdl.
"""

from __future__ import annotations

from typing import Any

EXECUTION_STATUS = (
    "COMPILED", "PENDING", "PENDING_RETRY", "PENDING_RESUME", "ORCHESTRATED",
    "RUNNING", "COMPLETE", "FAILED", "CANCELLED",
)  # fmt: skip
ISSUE_SEVERITY = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")

# record → {field: (type, required)}
RECORDS: dict[str, dict[str, tuple[Any, bool]]] = {
    "FlowId": {"flowName": ("string", True), "flowGroup": ("string", True)},
    "Schedule": {"cronSchedule": ("string", True), "runImmediately": ("boolean", False)},
    "FlowConfig": {
        "id": ("FlowId", True),
        "schedule": ("Schedule", False),
        "templateUris": ("string", True),
        "explain": ("boolean", False),
        "owningGroup": ("string", False),
        "properties": (("map", "string"), True),
    },
    "FlowStatusId": {
        "flowName": ("string", True),
        "flowGroup": ("string", True),
        "flowExecutionId": ("long", True),
    },
    "FlowStatistics": {"executionStartTime": ("long", True), "executionEndTime": ("long", True)},
    "JobId": {"jobName": ("string", True), "jobGroup": ("string", True)},
    "JobStatistics": {
        "executionStartTime": ("long", True),
        "executionEndTime": ("long", True),
        "processedCount": ("long", True),
        "jobProgress": ("int", True),
        "estimatedSecondsToCompletion": ("long", True),
    },
    "JobState": {"lowWatermark": ("string", True), "highWatermark": ("string", True)},
    "Issue": {
        "time": ("long", True),
        "severity": (("enum", ISSUE_SEVERITY), True),
        "code": ("string", True),
        "summary": ("string", True),
        "details": ("string", True),
        "properties": (("map", "string"), True),
    },
    "JobStatus": {
        "flowId": ("FlowId", True),
        "jobId": ("JobId", True),
        "jobTag": ("string", False),
        "executionStatus": (("enum", EXECUTION_STATUS), True),
        "message": ("string", True),
        "metrics": ("string", False),
        "executionStatistics": ("JobStatistics", True),
        "jobState": ("JobState", True),
        "issues": (("array", "Issue"), True),
    },
    "FlowStatus": {
        "id": ("FlowStatusId", True),
        "executionStatistics": ("FlowStatistics", True),
        "executionStatus": (("enum", EXECUTION_STATUS), True),
        "message": ("string", True),
        "jobStatuses": (("array", "JobStatus"), True),
    },
    "FlowExecution": {
        "id": ("FlowStatusId", True),
        "executionStatistics": ("FlowStatistics", True),
        "executionStatus": (("enum", EXECUTION_STATUS), True),
        "message": ("string", True),
        "jobStatuses": (("array", "JobStatus"), True),
        "issues": (("array", "Issue"), False),
    },
}


def problems(value: Any, kind: Any, path: str = "") -> list[str]:
    """Everything about `value` that a Pegasus validator of `kind` would refuse."""
    if isinstance(kind, tuple):
        if kind[0] == "map":
            if not isinstance(value, dict):
                return [f"{path}: not a map"]
            return [p for k, v in value.items() for p in problems(v, kind[1], f"{path}/{k}")]
        if kind[0] == "array":
            if not isinstance(value, list):
                return [f"{path}: not an array"]
            return [p for i, v in enumerate(value) for p in problems(v, kind[1], f"{path}/{i}")]
        if kind[0] == "enum":
            return [] if value in kind[1] else [f"{path}: {value!r} is not one of {kind[1]}"]
    if kind == "string":
        return [] if isinstance(value, str) else [f"{path}: not a string"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: not a boolean"]
    if kind in ("int", "long"):
        ok = isinstance(value, int) and not isinstance(value, bool)
        limit = 2**31 if kind == "int" else 2**63
        return [] if ok and -limit <= value < limit else [f"{path}: not an {kind}"]
    fields = RECORDS[kind]
    if not isinstance(value, dict):
        return [f"{path}: not a {kind} record"]
    found = [f"{path}/{name}: not a field of {kind}" for name in value if name not in fields]
    for name, (field_kind, required) in fields.items():
        if name in value:
            found.extend(problems(value[name], field_kind, f"{path}/{name}"))
        elif required:
            found.append(f"{path}/{name}: required field of {kind} missing")
    return found
