"""OpenLineage run events of jobs, and the lineage the portal keeps from them.

Each attempt of a job is an OpenLineage run: START when a worker claims it,
then COMPLETE (committed), FAIL (failed, or its worker died) or ABORT
(cancelled). Events are built from the job's bound JobSpec (which data nodes it
reads and writes: `flowport.hop.*`, the source and writer keys) and, once it
ended, its TaskStates (the datasets read, the schema Spark read). Datasets are
named as OpenLineage's naming spec does (`file` + path, `postgres://host:port`
+ `db.table`, …) and never carry credentials: a JDBC URL keeps only its scheme,
host, port and database.

The orchestration signal `job_run_changed` (orchestration.signals, sent inside
the transaction that moves the job) calls `job_changed`, which builds the event
then and hands it to a background sender after the commit. Sending never holds
a job up or fails it: a bounded queue (full: the event is dropped and logged),
a timeout per request (OPENLINEAGE_TIMEOUT_SECONDS), failures logged. A
COMPLETE also records the run's dataset edges (LineageEdge), which the
dataset pages read to say what feeds a dataset and what it feeds.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    parent_run,
    schema_dataset,
)
from openlineage.client.serde import Serde

from portal.orchestration.models import DatasetState, JobExecution, JobStatus, LineageEdge
from portal.pipeline import columnrules
from portal.pipeline.properties import Properties

logger = logging.getLogger(__name__)

PRODUCER = "https://github.com/flowport/flowport/tree/main/portal/orchestration/state/lineage.py"
RUN_NAMESPACE = uuid.UUID("6f1c8e0a-37a1-4c55-9d1e-0b7e4f0c3a37")  # uuid5 names of runs
EVENT_TYPES: dict[str, RunState] = {
    JobStatus.RUNNING: RunState.START,
    JobStatus.COMMITTED: RunState.COMPLETE,
    JobStatus.FAILED: RunState.FAIL,
    JobStatus.CANCELLED: RunState.ABORT,
}
JDBC_SCHEMES = {"postgresql": "postgres", "mariadb": "mysql", "mysql": "mysql", "sqlserver": "sqlserver"}


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str


def run_id(flow_group: str, flow_name: str, execution_id: int, job_name: str, attempt: int) -> str:
    """One run per attempt of a job, the same id for its START and its end (a UUID, as the spec wants)."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{flow_group}/{flow_name}#{execution_id}/{job_name}@{attempt}"))


def jdbc_dataset(url: str, table: str) -> Dataset:
    """`jdbc:postgresql://user:secret@db:5432/sales?password=x` and table `public.orders` →
    (`postgres://db:5432`, `sales.public.orders`): user, password and parameters are left out."""
    text = url[5:] if url.startswith("jdbc:") else url
    parts = urlsplit(text)
    scheme = JDBC_SCHEMES.get(parts.scheme, parts.scheme or "jdbc")
    if parts.hostname:
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        database = parts.path.strip("/").split(";")[0]
        return Dataset(f"{scheme}://{host}", f"{database}.{table}" if database else table)
    # No host (sqlite:/path/file.db): the file names the database.
    path = parts.path.split(";")[0].split("?")[0]
    return Dataset(scheme, f"{path}.{table}" if path else table)


def file_dataset(path: str) -> Dataset:
    """A folder: `s3a://bucket/key` → (`s3://bucket`, `key`); a local path → (`file`, path)."""
    parts = urlsplit(path)
    if parts.scheme and parts.scheme != "file" and parts.netloc:
        scheme = "s3" if parts.scheme in ("s3a", "s3n") else parts.scheme
        return Dataset(
            f"{scheme}://{parts.hostname or parts.netloc.rsplit('@', 1)[-1]}", parts.path.strip("/")
        )
    return Dataset("file", (parts.path if parts.scheme == "file" else path).rstrip("/") or "/")


def _tables(props: dict[str, str], task_states: list[dict[str, Any]]) -> list[str]:
    read = [state["dataset_urn"] for state in task_states if state.get("dataset_urn")]
    if read:
        return list(dict.fromkeys(read))
    # Before it ran: the tables the flow names (a pattern names none yet).
    return [t for t in Properties(props).get_list("source.jdbc.tables") if not any(c in t for c in "*?[")]


def inputs_of(props: dict[str, str], task_states: list[dict[str, Any]]) -> list[Dataset]:
    if props.get("source.jdbc.url"):
        url = props["source.jdbc.url"]
        tables = _tables(props, task_states)
        return [jdbc_dataset(url, table) for table in tables] or [jdbc_dataset(url, "")]
    if props.get("source.files.path"):
        return [file_dataset(props["source.files.path"])]
    return []


def outputs_of(
    props: dict[str, str], inputs: list[Dataset], task_states: list[dict[str, Any]]
) -> list[Dataset]:
    dirs = [v for k, v in sorted(props.items()) if k.split(".")[:4] == ["data", "publisher", "final", "dir"]]
    if dirs:
        return list(dict.fromkeys(file_dataset(d) for d in dirs))
    if props.get("writer.jdbc.url"):
        pattern = props.get("writer.jdbc.table", "") or "{table}"
        tables = _tables(props, task_states) or [dataset.name.rsplit(".", 1)[-1] for dataset in inputs]
        return list(
            dict.fromkeys(
                jdbc_dataset(props["writer.jdbc.url"], pattern.replace("{table}", t)) for t in tables
            )
        )
    if props.get("writer.iceberg.warehouse"):
        return [file_dataset(props["writer.iceberg.warehouse"])]
    return []


def _schema_fields(task_states: list[dict[str, Any]]) -> list[tuple[str, str]]:
    for state in task_states:
        text = state.get("source_schema")
        if not text:
            continue
        try:
            schema = json.loads(text)
        except ValueError:
            continue
        return [
            (str(f.get("name")), f["type"] if isinstance(f.get("type"), str) else json.dumps(f.get("type")))
            for f in schema.get("fields", [])
            if isinstance(f, dict)
        ]
    return []


MASKED = {
    columnrules.HASH: "hex SHA-256 of salt + value (columns.hash)",
    columnrules.ENCRYPT: "AES-256-GCM under the owner's customer key (columns.encrypt)",
}


def _facets(
    props: dict[str, str], inputs: list[Dataset], task_states: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The input's schema facet and the output's schema and column lineage facets. Column
    lineage is given for plain copies only (no converters; one input): each delivered column
    comes from the column of the same name, as is or masked by a column rule; dropped
    columns are neither in the output's schema nor in its lineage."""
    fields = _schema_fields(task_states)
    if not fields:
        return {}, {}
    input_facets: dict[str, Any] = {
        "schema": schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in fields]
        )
    }
    rules = columnrules.wanted(Properties(props))
    dropped = set(rules.get(columnrules.DROP, []))
    masked = {name: rule for rule in (columnrules.HASH, columnrules.ENCRYPT) for name in rules.get(rule, [])}
    delivered = [(name, "string" if name in masked else kind) for name, kind in fields if name not in dropped]
    output_facets: dict[str, Any] = {
        "schema": schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in delivered]
        )
    }
    if len(inputs) == 1 and not props.get("converter.classes"):
        source = inputs[0]
        lineage = {}
        for name, _kind in delivered:
            if name in masked:
                how = column_lineage_dataset.Transformation(
                    type="DIRECT", subtype="TRANSFORMATION", description=MASKED[masked[name]], masking=True
                )
            else:
                how = column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY", masking=False)
            lineage[name] = column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace=source.namespace, name=source.name, field=name, transformations=[how]
                    )
                ]
            )
        output_facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(fields=lineage)
    return input_facets, output_facets


def build_event(job: JobExecution, status: str, attempt: int, task_states: list[dict[str, Any]]) -> RunEvent:
    execution = job.execution
    props = dict((job.spec or {}).get("properties") or {})
    inputs = inputs_of(props, task_states)
    outputs = outputs_of(props, inputs, task_states)
    input_facets, output_facets = (
        _facets(props, inputs, task_states) if status == JobStatus.COMMITTED else ({}, {})
    )
    namespace = settings.OPENLINEAGE_NAMESPACE
    run_facets: dict[str, Any] = {
        "parent": parent_run.ParentRunFacet(
            run=parent_run.Run(runId=str(uuid.uuid5(RUN_NAMESPACE, f"{execution}"))),
            job=parent_run.Job(namespace=namespace, name=f"{execution.flow_group}.{execution.flow_name}"),
        )
    }
    if status in (JobStatus.FAILED, JobStatus.CANCELLED) and job.message:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=job.message[:2000], programmingLanguage="python"
        )
    return RunEvent(
        eventType=EVENT_TYPES[status],
        eventTime=timezone.now().isoformat(),
        run=Run(
            runId=run_id(
                execution.flow_group, execution.flow_name, execution.execution_id, job.job_name, attempt
            ),
            facets=run_facets,
        ),
        job=Job(
            namespace=namespace,
            name=job.job_name,  # already <flowGroup>.<flowName>.<hop>
            facets={
                "jobType": job_type_job.JobTypeJobFacet(
                    processingType="BATCH", integration="FLOWPORT", jobType="JOB"
                )
            },
        ),
        inputs=[InputDataset(namespace=d.namespace, name=d.name, facets=dict(input_facets)) for d in inputs],
        outputs=[
            OutputDataset(namespace=d.namespace, name=d.name, facets=dict(output_facets)) for d in outputs
        ],
        producer=PRODUCER,
    )


def _record_edges(job: JobExecution, event: RunEvent) -> None:
    execution = job.execution
    for source in event.inputs or []:
        for target in event.outputs or []:
            LineageEdge.objects.update_or_create(
                source_namespace=source.namespace,
                source_name=source.name,
                target_namespace=target.namespace,
                target_name=target.name,
                flow_group=execution.flow_group,
                flow_name=execution.flow_name,
                job_name=job.job_name,
                defaults={"execution_id": execution.execution_id, "seen": timezone.now()},
            )


def job_changed(
    job: JobExecution, status: str, attempt: int, task_states: list[dict[str, Any]] | None
) -> None:
    """The receiver's work (inside the job's transaction): record a COMPLETE's edges and, when a
    destination is configured, queue the event for after the commit. Never raises."""
    if status not in EVENT_TYPES or (status != JobStatus.COMMITTED and not configured()):
        return  # nothing to send, and only a committed run's edges are kept
    try:
        # A savepoint: a failed query here rolls back to it and leaves the job's own write alone.
        with transaction.atomic():
            event = build_event(job, status, attempt, task_states or [])
            if status == JobStatus.COMMITTED:
                _record_edges(job, event)
    except Exception:
        logger.exception("could not make the lineage event of %s (%s)", job, status)
        return
    if configured():
        transaction.on_commit(lambda: sender().submit(event))


def configured() -> bool:
    return bool(settings.OPENLINEAGE_URL or settings.OPENLINEAGE_FILE)


def transports() -> list[Any]:
    """The configured destinations, as the openlineage client's own transports."""
    # Imported when events are sent only: the transports pull in requests and fsspec's registry.
    from openlineage.client.transport.file import FileConfig, FileTransport
    from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

    made: list[Any] = []
    if settings.OPENLINEAGE_URL:
        config = HttpConfig(
            url=settings.OPENLINEAGE_URL,
            timeout=float(settings.OPENLINEAGE_TIMEOUT_SECONDS),
            retry={
                "total": 1,
                "read": 0,
                "connect": 1,
                "backoff_factor": 0.2,
                "status_forcelist": [502, 503, 504],
                "allowed_methods": ["POST"],
            },
        )
        if settings.OPENLINEAGE_API_KEY:
            config.auth = ApiKeyTokenProvider({"apiKey": settings.OPENLINEAGE_API_KEY})
        made.append(HttpTransport(config))
    if settings.OPENLINEAGE_FILE:
        made.append(FileTransport(FileConfig(log_file_path=settings.OPENLINEAGE_FILE, append=True)))
    return made


class Sender:
    """One background thread per process that sends queued events, so a job never waits for
    the lineage endpoint. The queue is bounded: when the endpoint is down long enough to fill
    it, newer events are dropped (logged), never held in memory without end."""

    def __init__(self, size: int = 1000) -> None:
        self.queue: queue.Queue[RunEvent] = queue.Queue(maxsize=size)
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.sent = 0
        self.failed = 0

    def submit(self, event: RunEvent) -> None:
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.failed += 1
            logger.warning(
                "lineage queue full: the %s event of %s was dropped", event.eventType, event.job.name
            )
            return
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="openlineage-sender", daemon=True)
                self.thread.start()

    def _loop(self) -> None:
        while True:
            event = self.queue.get()
            try:
                for transport in transports():
                    transport.emit(event)
                self.sent += 1
            except Exception as error:
                self.failed += 1
                logger.warning(
                    "could not send the %s lineage event of %s: %s", event.eventType, event.job.name, error
                )
            finally:
                self.queue.task_done()

    def wait(self, timeout: float = 10.0) -> bool:
        """Until the queue is empty (tests, shutdown); False if it is not within `timeout`."""
        emptied = threading.Event()

        def join() -> None:
            self.queue.join()
            emptied.set()

        threading.Thread(target=join, daemon=True).start()
        return emptied.wait(timeout)


_sender = Sender()


def sender() -> Sender:
    return _sender


def as_json(event: RunEvent) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(Serde.to_json(event))
    return document


# --- what the dataset pages read --------------------------------------------------------


def dataset_of_state(state: DatasetState) -> Dataset | None:
    """The dataset a state row keeps the watermark of (the job's input), from its last run's spec."""
    job = (
        JobExecution.objects.filter(
            execution__flow_group=state.flow_group,
            execution__flow_name=state.flow_name,
            job_name=state.job_name,
        )
        .order_by("-execution__execution_id")
        .only("spec")
        .first()
    )
    if job is None:
        return None
    props = dict((job.spec or {}).get("properties") or {})
    found = inputs_of(props, [{"dataset_urn": state.dataset_urn}])
    return found[0] if found else None


MAX_HOPS = 5
MAX_EDGES = 100


def _walk(start: Dataset, *, up: bool) -> list[LineageEdge]:
    """Edges into `start` and into what feeds it (`up`), or out of it and of what it feeds,
    hop by hop (at most MAX_HOPS hops, MAX_EDGES edges: one query per hop)."""
    found: list[LineageEdge] = []
    seen: set[int] = set()
    frontier = {start}
    for _ in range(MAX_HOPS):
        if not frontier or len(found) >= MAX_EDGES:
            break
        match = Q()
        for dataset in frontier:
            if up:
                match |= Q(target_namespace=dataset.namespace, target_name=dataset.name)
            else:
                match |= Q(source_namespace=dataset.namespace, source_name=dataset.name)
        edges = [
            e for e in LineageEdge.objects.filter(match).order_by("-seen")[:MAX_EDGES] if e.pk not in seen
        ]
        seen.update(e.pk for e in edges)
        found += edges
        frontier = {
            Dataset(e.source_namespace, e.source_name) if up else Dataset(e.target_namespace, e.target_name)
            for e in edges
        }
    return found[:MAX_EDGES]


def readers_of(flow_group: str, flow_name: str) -> list[str]:
    """The other flows ("group/name") whose recorded runs read a dataset this flow's runs wrote:
    the flows directly downstream of it (one query per direction, at most MAX_EDGES datasets)."""
    written = (
        LineageEdge.objects.filter(flow_group=flow_group, flow_name=flow_name)
        .values_list("target_namespace", "target_name")
        .distinct()[:MAX_EDGES]
    )
    match = Q()
    for namespace, name in written:
        match |= Q(source_namespace=namespace, source_name=name)
    if not match:
        return []
    keys = (
        LineageEdge.objects.filter(match)
        .exclude(flow_group=flow_group, flow_name=flow_name)
        .values_list("flow_group", "flow_name")
        .distinct()
    )
    return sorted(f"{group}/{name}" for group, name in keys)


def feeding(dataset: Dataset) -> list[LineageEdge]:
    """What feeds `dataset`, from recorded runs: the datasets and flows upstream of it."""
    return _walk(dataset, up=True)


def fed(dataset: Dataset) -> list[LineageEdge]:
    """What `dataset` feeds, from recorded runs: the flows that read it and what they wrote, on."""
    return _walk(dataset, up=False)


def neighbours(state: Any, visible: Callable[[str, str], bool] | None = None) -> dict[str, Any]:
    """The dataset pages' lineage: the dataset a state row reads, what feeds it and what it
    feeds, keeping only the edges of flows `visible` says the viewer may see."""
    dataset = dataset_of_state(state)
    if dataset is None:
        return {"lineage_dataset": None, "upstream": [], "downstream": []}

    def shown(edges: list[LineageEdge]) -> list[LineageEdge]:
        return [e for e in edges if visible is None or visible(e.flow_group, e.flow_name)]

    return {
        "lineage_dataset": dataset,
        "upstream": shown(feeding(dataset)),
        "downstream": shown(fed(dataset)),
    }
