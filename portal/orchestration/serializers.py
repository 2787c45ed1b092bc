"""GaaS's FlowStatus and JobStatus records (camelCase, times in epoch
milliseconds), plus what Flowport adds: executor, attempt, Spark UI, progress
and log excerpt per job; trigger and pending requests per execution.

Messages and log excerpts are given as the requesting user may read them
(portal.orchestration.redaction: whole for staff, without server paths and
tracebacks for everyone else; redacted when no request is in the context), and
the Spark UI's address only to whoever may act on the execution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.orchestration import outputs, redaction, status
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus
from portal.orchestration.state import statestore, tries
from portal.pipeline.destinations.published import FILES, ICEBERG, JDBC


@extend_schema_field({"type": "integer", "format": "int64", "nullable": True})
class EpochMillisField(serializers.ReadOnlyField):
    """A datetime as epoch milliseconds; null while it has not happened."""

    def to_representation(self, value):
        return status.epoch_millis(value)


class ExecutionStatusField(serializers.ReadOnlyField):
    enum_name, choices = "ExecutionStatusEnum", ExecutionStatus


class JobStatusField(serializers.ReadOnlyField):
    enum_name, choices = "JobStatusEnum", JobStatus


class TriggerField(serializers.ReadOnlyField):
    enum_name, choices = "TriggerEnum", FlowExecution.Trigger


class _NamedEnumExtension(OpenApiSerializerFieldExtension):
    """Each status set is one named enum component. Inline enums would be
    named by field (`executionStatus` is both a flow's and a job's status),
    which drf-spectacular can only resolve with a warning."""

    target_class = "portal.orchestration.serializers.ExecutionStatusField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        component = ResolvedComponent(
            name=field.enum_name,
            type=ResolvedComponent.SCHEMA,
            object=field.enum_name,
            schema={"type": "string", "enum": list(field.choices.values)},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


class _JobStatusEnumExtension(_NamedEnumExtension):
    target_class = "portal.orchestration.serializers.JobStatusField"


class _TriggerEnumExtension(_NamedEnumExtension):
    target_class = "portal.orchestration.serializers.TriggerField"


def _reader(context: Mapping[str, Any]) -> Any:
    request = context.get("request")
    return getattr(request, "user", None)


def _kept(context: Mapping[str, Any], name: str, value: Any) -> Any:
    """Keep `value` in the root serializer's context (a dict, unless no context was given)."""
    if isinstance(context, dict):
        context[name] = value
    return value


class ShownTextField(serializers.CharField):
    """A message or log text as the requesting user may read it. The reader's redaction is kept
    in the root serializer's context, so a list reads the data nodes' roots once."""

    def __init__(self, **kwargs) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value) -> str:
        shown = self.context.get("shown")
        if not isinstance(shown, redaction.Shown):
            shown = _kept(self.context, "shown", redaction.Shown(_reader(self.context)))
        return shown(super().to_representation(value))


def camel_case(key: str) -> str:
    """`work_units_total` -> `workUnitsTotal`: the API's spelling of a stored snake_case key."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {camel_case(str(key)): _camel_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_camel_keys(item) for item in value]
    return value


class CamelCaseDictField(serializers.DictField):
    """A stored record (the heartbeat's progress, written by the pipeline in snake_case) read
    out with camelCase keys at every level, as the API's own fields are named."""

    def to_representation(self, value: Any) -> dict[str, Any]:
        return _camel_keys(value) if isinstance(value, dict) else {}


class TrySerializer(serializers.Serializer):
    """One try of a job (orchestration.state.tries)."""

    attempt = serializers.IntegerField()
    cause = serializers.CharField(help_text="Why it began: first try, retry, redelivery or resume.")
    status = serializers.CharField(help_text="How it ended, or PENDING/ORCHESTRATED/RUNNING while current.")
    worker = serializers.CharField(help_text="The worker that ran it; empty when none claimed it.")
    startTime = EpochMillisField(source="started_at", help_text="Null while queued.")
    endTime = EpochMillisField(source="ended_at")
    message = ShownTextField(help_text="Why it ended so (its error when it failed).")
    current = serializers.BooleanField()


class JobStatusSerializer(serializers.Serializer):
    flowName = serializers.CharField(source="execution.flow_name", read_only=True)
    flowGroup = serializers.CharField(source="execution.flow_group", read_only=True)
    jobName = serializers.CharField(source="job_name", read_only=True)
    jobGroup = serializers.CharField(source="job_group", read_only=True)
    executionStartTime = EpochMillisField(source="started_at")
    executionEndTime = EpochMillisField(source="ended_at")
    executionStatus = JobStatusField(source="status")
    message = ShownTextField()
    processedCount = serializers.IntegerField(
        source="processed_count",
        read_only=True,
        help_text="Rows delivered (published by the commit) once the job finished; rows read so far while it runs.",
    )
    recordsRead = serializers.IntegerField(source="records_read", read_only=True, help_text="Rows extracted.")
    recordsRejected = serializers.IntegerField(
        source="records_rejected", read_only=True, help_text="Rows failed by row quality policies."
    )
    lowWatermark = serializers.CharField(source="low_watermark", read_only=True)
    highWatermark = serializers.CharField(
        source="high_watermark",
        read_only=True,
        help_text="The watermark the commit checked in (the previous one when nothing was committed).",
    )
    hopIndex = serializers.IntegerField(source="hop_index", read_only=True)
    parents = serializers.ListField(child=serializers.CharField(), read_only=True)
    executor = serializers.CharField(read_only=True, help_text="The SpecExecutor the job is bound to.")
    attempt = serializers.IntegerField(
        read_only=True, help_text="Every dispatch (retry, resume or redelivery) is a new attempt."
    )
    retries = serializers.IntegerField(read_only=True)
    tries = serializers.SerializerMethodField(
        help_text="Its kept tries, first first: each retry, redelivery (its worker died) or resume "
        "is a new try, with why it began, its worker, times, status and reason."
    )
    maxRetries = serializers.IntegerField(source="max_retries", read_only=True)
    sparkUiUrl = serializers.SerializerMethodField(
        help_text="The portal's address of the Spark UI of the job's driver, while the job runs, for "
        "staff (the UI shows every job its worker ran); empty for everyone else, once the job ended, "
        "and when the worker runs Spark without its UI (SPARK_UI_ENABLED)."
    )
    progress = CamelCaseDictField(
        read_only=True,
        help_text="Spark task counts from the last heartbeat; the final counts once the job has run "
        "(tasksTotal, tasksDone, workUnits, …: camelCase like the rest of this record); under spark, "
        "the application that runs the job (applicationId, master, state, executors) and what Spark "
        "did to the job (events, each with at, message and kind: executors_lost, executors_added, "
        "task_attempts_failed, no_executors or executors_back).",
    )
    logExcerpt = ShownTextField(source="log_excerpt", help_text="The tail of the worker's log of the job.")
    driverLogExcerpt = ShownTextField(
        source="driver_log_excerpt", help_text="The tail of the job's Spark driver log."
    )

    @extend_schema_field(TrySerializer(many=True))
    def get_tries(self, job: JobExecution) -> list[dict[str, Any]]:
        return list(TrySerializer(tries.tries_of(job), many=True, context=self.context).data)

    @extend_schema_field(serializers.CharField())
    def get_sparkUiUrl(self, job: JobExecution) -> str:
        if not job.spark_ui_url:
            return ""
        allowed = self.context.get("spark_ui")
        if not isinstance(allowed, dict):
            allowed = _kept(self.context, "spark_ui", {})
        if job.execution_id not in allowed:
            allowed[job.execution_id] = status.can_see_spark_ui(_reader(self.context), job.execution)
        if not allowed[job.execution_id]:
            return ""
        path = status.spark_ui_path(job)
        request = self.context.get("request")
        return request.build_absolute_uri(path) if path and request is not None else path


class FlowExecutionSerializer(serializers.Serializer):
    """One execution of a flow, without its jobs (history lists)."""

    flowName = serializers.CharField(source="flow_name", read_only=True)
    flowGroup = serializers.CharField(source="flow_group", read_only=True)
    flowExecutionId = serializers.IntegerField(
        source="execution_id", read_only=True, help_text="Epoch milliseconds of its creation."
    )
    displayName = serializers.CharField(
        source="display_name",
        read_only=True,
        help_text='Its name for people: the flow and its logical date ("orders-daily · 2026-11-26 02:00", '
        "the cron tick or, run by hand, when it was asked for, in the portal's time zone).",
    )
    executionStartTime = EpochMillisField(source="started_at")
    executionEndTime = EpochMillisField(source="ended_at")
    executionStatus = ExecutionStatusField(source="status")
    message = ShownTextField()
    trigger = TriggerField()
    scheduledTime = EpochMillisField(source="scheduled_at", help_text="The cron tick; null when run by hand.")
    requestedBy = serializers.CharField(source="requested_by", read_only=True)
    backfill = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField()),
        read_only=True,
        help_text="{datasetUrn: {low, high}} for a backfill run.",
    )
    cancelRequested = serializers.BooleanField(source="cancel_requested", read_only=True)
    flowVersion = serializers.IntegerField(
        source="flow_version",
        read_only=True,
        allow_null=True,
        help_text="The flow version it compiled from (/flows/{group}/{name}/versions/); null before it compiled.",
    )
    pinnedVersion = serializers.IntegerField(
        source="pinned_version",
        read_only=True,
        allow_null=True,
        help_text="Set when a re-run asked for the version an earlier execution ran.",
    )
    packVersions = serializers.DictField(
        source="pack_versions",
        child=serializers.IntegerField(),
        read_only=True,
        help_text="{templatePack: version} of the templates it compiled with.",
    )
    topologyRevision = serializers.IntegerField(
        source="topology_revision",
        read_only=True,
        allow_null=True,
        help_text="The topology revision it compiled against.",
    )
    planHash = serializers.CharField(
        source="plan_hash", read_only=True, help_text="SHA-256 of its job plan: equal hashes, the same plan."
    )


class WaitingDatasetSerializer(serializers.Serializer):
    datasetUrn = serializers.CharField(source="dataset_urn")
    jobName = serializers.CharField(source="job_name")
    flowExecutionId = serializers.IntegerField(source="execution_id", allow_null=True)
    attempt = serializers.IntegerField()
    redoFailures = serializers.IntegerField(source="redo_failures")
    reason = serializers.CharField()


class OutputSerializer(serializers.Serializer):
    """One dataset a committed job delivered, and where (orchestration.outputs)."""

    jobName = serializers.CharField(source="job_name")
    datasetUrn = serializers.CharField(source="dataset_urn")
    node = serializers.CharField(help_text="The destination data node.")
    kind = serializers.ChoiceField(choices=[FILES, JDBC, ICEBERG])
    format = serializers.CharField(help_text="PARQUET, CSV, JSON, … (files); JDBC; ICEBERG.")
    where = serializers.CharField(
        help_text="A files dataset's folder relative to its node (e.g. team/orders/orders); a JDBC "
        "table as the flow names it (schema.table); an Iceberg namespace.table."
    )
    absolutePath = serializers.CharField(
        source="absolute", help_text="The folder as the server names it: for staff only, else empty."
    )
    files = serializers.IntegerField(allow_null=True, help_text="Files published (files only).")
    records = serializers.IntegerField(help_text="Records the commit published.")
    previewUrl = serializers.CharField(
        source="preview_url",
        help_text="The page with its first 20 rows, for the flow's owners and staff (files and JDBC).",
    )


class FlowStatusSerializer(FlowExecutionSerializer):
    """GaaS's FlowStatus: an execution with its JobStatuses."""

    jobStatuses = JobStatusSerializer(source="jobs", many=True, read_only=True)
    pendingRequests = serializers.SerializerMethodField(
        help_text="LAUNCH, KILL or RESUME requests the orchestrator has not handled yet."
    )

    outputs = serializers.SerializerMethodField(
        help_text="Where each dataset its committed jobs delivered went: node, folder or table, "
        "files and records."
    )

    waitingDatasets = serializers.SerializerMethodField(
        help_text="The flow's datasets whose stored commit is waiting to be finished (a worker died "
        "while committing them, or their redo failed), each with why: every run fails until they are."
    )

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_pendingRequests(self, execution: FlowExecution) -> list[str]:
        return status.pending_requests(execution.flow_group, execution.flow_name, execution.execution_id)

    @extend_schema_field(OutputSerializer(many=True))
    def get_outputs(self, execution: FlowExecution) -> list[dict[str, Any]]:
        found = outputs.of_execution(execution, _reader(self.context))
        return list(OutputSerializer(found, many=True).data)

    @extend_schema_field(WaitingDatasetSerializer(many=True))
    def get_waitingDatasets(self, execution: FlowExecution) -> list[dict[str, Any]]:
        if execution.flow_id is None:  # the flow was deleted: its steps went with it
            return []
        found = statestore.waiting_datasets(execution.flow_id, execution.flow_group, execution.flow_name)
        return list(WaitingDatasetSerializer(found, many=True).data)


class BackfillRangeSerializer(serializers.Serializer):
    low = serializers.CharField(
        max_length=4000,
        allow_blank=True,
        allow_null=True,
        help_text="Low watermark; empty or null reads from the first record.",
    )
    high = serializers.CharField(max_length=4000, help_text="High watermark.")

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"low", "high"})
            if unknown:
                raise serializers.ValidationError(
                    {key: ["Unknown key; give low and high."] for key in unknown}
                )
            for key in ("low", "high"):
                value = data.get(key)
                if isinstance(value, bool) or not isinstance(value, str | int | type(None)):
                    raise serializers.ValidationError(
                        {key: [f"Must be a string, not {type(value).__name__}."]}
                    )
        return super().to_internal_value(data)


class RunRequestSerializer(serializers.Serializer):
    backfill = serializers.DictField(
        child=BackfillRangeSerializer(),
        required=False,
        help_text="Backfill these datasets between the given watermarks; the stored watermarks do not move.",
    )

    def validate_backfill(self, value: dict) -> dict:
        for urn in value:
            if not urn.strip() or len(urn) > 500:
                raise serializers.ValidationError("Each dataset URN must be 1-500 characters.")
            if "\x00" in urn or any(0xD800 <= ord(char) <= 0xDFFF for char in urn):
                raise serializers.ValidationError(f"{urn!r}: NUL and surrogate characters are not allowed.")
        return value

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"backfill"})
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)
