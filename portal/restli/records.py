"""Gobblin's Pegasus records (gobblin-flow-config-service-api, `*.pdl`) to and
from Flowport's models: FlowConfig with FlowId and Schedule; FlowExecution,
FlowStatus and JobStatus with their statistics, JobState and Issues.

`gobblin_status` / `job_gobblin_status` are the one place Flowport's
execution states become Gobblin's ExecutionStatus values; `/api/` keeps
Flowport's own names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone

from portal.accounts import access
from portal.flows.models import DESTINATION_PROPERTY, SOURCE_PROPERTY, FlowConfig
from portal.flows.schedules import to_unix_cron
from portal.orchestration import status as execution_status
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus
from portal.orchestration.redaction import redact
from portal.restli.errors import RestLiError, ValidationFailure

EXECUTION_ID_PROPERTY = "flow.executionId"
UNSCHEDULE_PROPERTY = "flow.unschedule"
COMPILED_PROPERTY = "gobblin.flow.compiled"
# Gobblin's FlowConfigResourceLocalHandler.NEVER_RUN_CRON_SCHEDULE.
NEVER_RUN_SCHEDULE = "0 0 0 ? 1 1 2050"
MAX_KEY_LENGTH = 128

# Gobblin's ExecutionStatus enum (ExecutionStatus.pdl).
GOBBLIN_STATUSES = (
    "COMPILED",
    "PENDING",
    "PENDING_RETRY",
    "PENDING_RESUME",
    "ORCHESTRATED",
    "RUNNING",
    "COMPLETE",
    "FAILED",
    "CANCELLED",
)
_FLOW_STATUS = {
    ExecutionStatus.PENDING: "PENDING",
    ExecutionStatus.COMPILED: "COMPILED",
    ExecutionStatus.RUNNING: "RUNNING",
    ExecutionStatus.COMMITTED: "COMPLETE",
    ExecutionStatus.FAILED: "FAILED",
    ExecutionStatus.CANCELLED: "CANCELLED",
    # A tick skipped because the flow was still running: Gobblin reports a
    # skipped job or flow as CANCELLED (KafkaAvroJobStatusMonitor).
    ExecutionStatus.SKIPPED: "CANCELLED",
}
_JOB_STATUS = {
    JobStatus.PENDING: "PENDING",
    JobStatus.ORCHESTRATED: "ORCHESTRATED",
    JobStatus.RUNNING: "RUNNING",
    JobStatus.COMMITTED: "COMPLETE",
    JobStatus.FAILED: "FAILED",
    JobStatus.CANCELLED: "CANCELLED",
    JobStatus.SKIPPED: "CANCELLED",  # its parent failed: Gobblin cancels the rest of the DAG
}


def gobblin_status(status: str, *, resume_requested: bool = False) -> str:
    """A failed or cancelled execution whose RESUME the orchestrator has not
    picked up yet is Gobblin's PENDING_RESUME."""
    if resume_requested and status in (ExecutionStatus.FAILED, ExecutionStatus.CANCELLED):
        return "PENDING_RESUME"
    return _FLOW_STATUS[ExecutionStatus(status)]


def job_gobblin_status(job: JobExecution) -> str:
    if job.status == JobStatus.PENDING and job.retries > 0:
        return "PENDING_RETRY"  # waiting out the backoff before its next attempt
    return _JOB_STATUS[JobStatus(job.status)]


def flowport_statuses(gobblin: str) -> list[str]:
    """The Flowport states a Gobblin status filter matches (finders' `executionStatus`)."""
    if gobblin not in GOBBLIN_STATUSES:
        raise RestLiError(400, f"executionStatus {gobblin!r} is not one of {', '.join(GOBBLIN_STATUSES)}.")
    return [status for status, name in _FLOW_STATUS.items() if name == gobblin]


# --- FlowConfig -------------------------------------------------------------------------


def flow_id(value: Any, path: str) -> tuple[str, str]:
    """(flowGroup, flowName) of a FlowId, checked as FlowId.pdl does (strlen 1-128)."""
    if not isinstance(value, dict):
        raise ValidationFailure([(path, "field is required but not found and has no default value")])
    problems: list[tuple[str, str]] = []
    names: list[str] = []
    for field in ("flowGroup", "flowName"):
        item = value.get(field)
        if item is None:
            problems.append((f"{path}/{field}", "field is required but not found and has no default value"))
        elif not isinstance(item, str):
            problems.append((f"{path}/{field}", f"{item!r} cannot be coerced to String"))
        elif not 1 <= len(item) <= MAX_KEY_LENGTH:
            problems.append((f"{path}/{field}", f"length of {item!r} is out of range 1...{MAX_KEY_LENGTH}"))
        else:
            names.append(item)
    if problems:
        raise ValidationFailure(problems)
    return names[0], names[1]


def _is_cron(expression: str) -> bool:
    try:
        to_unix_cron(expression)
    except DjangoValidationError:
        return False
    return True


def parse_flow_config(body: Any, *, partial: bool = False) -> dict[str, Any]:  # noqa: C901, PLR0915
    """A FlowConfig record, or the design document's flat form (`flowGroup`,
    `flowName`, `schedule` as a string, `templateNames`…), as the fields
    that were given: `flowGroup`, `flowName`, `schedule` (a string or None),
    `runImmediately`, `templateUris`, `properties`, `explain`, `owningGroup`.
    Schema problems are a 422 naming each field path."""
    if not isinstance(body, dict):
        raise RestLiError(400, "The request body must be a JSON object (a FlowConfig record).")
    problems: list[tuple[str, str]] = []
    given: dict[str, Any] = {}

    if "id" in body:
        try:
            given["flowGroup"], given["flowName"] = flow_id(body["id"], "/id")
        except ValidationFailure as failure:
            problems.extend(failure.problems)
    elif "flowGroup" in body or "flowName" in body:  # the design document's flat form
        try:
            given["flowGroup"], given["flowName"] = flow_id(body, "")
        except ValidationFailure as failure:
            problems.extend(failure.problems)
    elif not partial:
        problems.append(("/id", "field is required but not found and has no default value"))

    schedule = body.get("schedule")
    if isinstance(schedule, dict):
        cron = schedule.get("cronSchedule")
        if not isinstance(cron, str):
            problems.append(
                ("/schedule/cronSchedule", "field is required but not found and has no default value")
            )
        elif cron.strip() and not _is_cron(cron):
            problems.append(("/schedule/cronSchedule", f'"{cron}" is not in Cron format'))
        else:
            given["schedule"] = cron
        run = schedule.get("runImmediately", False)
        if not isinstance(run, bool):
            problems.append(("/schedule/runImmediately", f"{run!r} cannot be coerced to Boolean"))
        given["runImmediately"] = run is True
    elif isinstance(schedule, str):
        if schedule.strip() and not _is_cron(schedule):
            problems.append(("/schedule", f'"{schedule}" is not in Cron format'))
        given["schedule"] = schedule
        if "runImmediately" in body:
            given["runImmediately"] = body["runImmediately"] is True
    elif schedule is not None:
        problems.append(("/schedule", f"{schedule!r} is not a Schedule record"))

    for name in ("templateUris", "templateNames", "templateName"):
        if name in body:
            value = body[name]
            if not isinstance(value, str):
                problems.append((f"/{name}", f"{value!r} cannot be coerced to String"))
            else:
                given["templateUris"] = value
            break
    else:
        if not partial:
            problems.append(("/templateUris", "field is required but not found and has no default value"))

    if "properties" in body:
        properties = body["properties"]
        if not isinstance(properties, dict):
            problems.append(("/properties", f"{properties!r} is not a map"))
        else:
            for key, value in properties.items():
                if not isinstance(value, str):
                    problems.append((f"/properties/{key}", f"{value!r} cannot be coerced to String"))
            given["properties"] = properties
    elif not partial:
        problems.append(("/properties", "field is required but not found and has no default value"))

    for name in ("explain",):
        if name in body:
            if not isinstance(body[name], bool):
                problems.append((f"/{name}", f"{body[name]!r} cannot be coerced to Boolean"))
            given[name] = body[name] is True
    if "owningGroup" in body:
        if not isinstance(body["owningGroup"], str):
            problems.append(("/owningGroup", f"{body['owningGroup']!r} cannot be coerced to String"))
        given["owningGroup"] = body["owningGroup"]
    if problems:
        raise ValidationFailure(problems)
    return given


def owning_group_for(user, name: str | None) -> Group | None:
    """The Group named `name`, if `user` is a member; Gobblin's check: only a
    member may make a group own a flow."""
    if not name:
        return None
    group = access.restrict(Group.objects.filter(name=name), user, access.CHANGE).first()
    if group is None:
        raise RestLiError(403, f"Requester not part of owning group specified: {name!r}.")
    return group


def service_data(given: dict[str, Any], user) -> dict[str, Any]:
    """The FlowConfig fields for flows.services from a parsed record."""
    data: dict[str, Any] = {}
    if "flowGroup" in given:
        data["flow_group"], data["flow_name"] = given["flowGroup"], given["flowName"]
    if "templateUris" in given:
        data["template_uris"] = given["templateUris"]
    if "properties" in given:
        properties = dict(given["properties"])
        data["properties"] = properties
        # Gobblin flows name their endpoints in properties; they decide on every write.
        if properties.get(SOURCE_PROPERTY):
            data["source"] = properties[SOURCE_PROPERTY].strip()
        if properties.get(DESTINATION_PROPERTY):
            data["destinations"] = [
                d.strip() for d in properties[DESTINATION_PROPERTY].split(",") if d.strip()
            ]
    if "schedule" in given:
        schedule = given["schedule"] or ""
        data["schedule"] = schedule
        data["schedule_given"] = " ".join(schedule.split())
    if "runImmediately" in given:
        data["run_immediately"] = given["runImmediately"]
    if "owningGroup" in given:
        data["owning_group"] = owning_group_for(user, given["owningGroup"])
    return data


def schedule_text(flow: FlowConfig) -> str:
    """The schedule as it was given, while it still means what is stored."""
    given = flow.schedule_given
    if given:
        try:
            if to_unix_cron(given) == flow.schedule:
                return given
        except DjangoValidationError:  # a stale given form falls back to the stored one
            pass
    return flow.schedule


def flow_config_record(flow: FlowConfig) -> dict[str, Any]:
    """FlowConfig.pdl: `id`, `schedule` (only for a scheduled flow, as
    Gobblin's FlowSpec.Utils.toFlowConfig), `templateUris`, `owningGroup`,
    `properties`."""
    record: dict[str, Any] = {
        "id": {"flowGroup": flow.flow_group, "flowName": flow.flow_name},
        "templateUris": flow.template_uris,
        "properties": dict(flow.properties),
    }
    if flow.schedule:
        record["schedule"] = {"cronSchedule": schedule_text(flow), "runImmediately": flow.run_immediately}
    if flow.owning_group is not None:
        record["owningGroup"] = flow.owning_group.name
    return record


# --- executions -------------------------------------------------------------------------


def _millis(moment: datetime | None) -> int:
    return execution_status.epoch_millis(moment) or 0


def _issue(moment: datetime | None, code: str, summary: str) -> dict[str, Any]:
    """Issue.pdl: Flowport's failure messages, as Gobblin's issues."""
    return {
        "time": _millis(moment or timezone.now()),
        "severity": "ERROR",
        "code": code,
        "summary": summary[:1000],
        "details": summary,
        "properties": {},
    }


def job_status_record(
    job: JobExecution, execution: FlowExecution, include_issues: bool, shown: Callable[[str], str] = redact
) -> dict[str, Any]:
    """JobStatus.pdl; its message as `shown` gives it (redacted unless told otherwise)."""
    percent = execution_status.progress_percent(job) or 0
    seconds_left = 0
    if 0 < percent < 100 and job.started_at is not None:
        elapsed = (timezone.now() - job.started_at).total_seconds()
        seconds_left = int(elapsed * (100.0 / percent - 1))  # Gobblin's estimateCopyTimeLeft
    issues = []
    if include_issues and job.status == JobStatus.FAILED and job.message:
        issues.append(_issue(job.ended_at, "FLOWPORT_JOB_FAILED", shown(job.message)))
    return {
        "flowId": {"flowGroup": execution.flow_group, "flowName": execution.flow_name},
        "jobId": {"jobName": job.job_name, "jobGroup": job.job_group},
        "executionStatus": job_gobblin_status(job),
        "message": shown(job.message),
        "executionStatistics": {
            "executionStartTime": _millis(job.started_at),
            "executionEndTime": _millis(job.ended_at),
            "processedCount": job.processed_count,
            "jobProgress": percent,
            "estimatedSecondsToCompletion": seconds_left,
        },
        "jobState": {"lowWatermark": job.low_watermark, "highWatermark": job.high_watermark},
        "issues": issues,
    }


def flow_status_record(
    execution: FlowExecution,
    *,
    include_issues: bool = False,
    resume_requested: bool = False,
    shown: Callable[[str], str] = redact,
) -> dict[str, Any]:
    """FlowStatus.pdl (FlowExecution.pdl without `issues`). As Gobblin, the
    start time is the flowExecutionId and the end time the flow's, or its
    last job's."""
    jobs = sorted(execution.jobs.all(), key=lambda j: (_millis(j.started_at), j.hop_index, j.job_name))
    end = _millis(execution.ended_at) or max((_millis(j.ended_at) for j in jobs), default=0)
    return {
        "id": {
            "flowGroup": execution.flow_group,
            "flowName": execution.flow_name,
            "flowExecutionId": execution.execution_id,
        },
        "executionStatistics": {"executionStartTime": execution.execution_id, "executionEndTime": end},
        "executionStatus": gobblin_status(execution.status, resume_requested=resume_requested),
        "message": shown(execution.message),
        "jobStatuses": [job_status_record(job, execution, include_issues, shown) for job in jobs],
    }


def flow_execution_record(
    execution: FlowExecution,
    *,
    include_issues: bool,
    resume_requested: bool = False,
    shown: Callable[[str], str] = redact,
) -> dict[str, Any]:
    """FlowExecution.pdl: flow-level issues are a failed execution's message."""
    record = flow_status_record(
        execution, include_issues=include_issues, resume_requested=resume_requested, shown=shown
    )
    issues = []
    if include_issues and execution.status == ExecutionStatus.FAILED and execution.message:
        issues.append(_issue(execution.ended_at, "FLOWPORT_FLOW_FAILED", shown(execution.message)))
    record["issues"] = issues
    return record
