"""Where an execution's data went, and a preview of its first rows.

Every committed job's commit published its datasets somewhere
(:mod:`portal.pipeline.destinations.published` reads it back from the job's spec and TaskStates):
a files destination's folder with its files, a JDBC destination's table, an Iceberg table. The
execution page and the REST API name each one; a folder reads relative to its data node
(``my-folder:team/orders/orders``), never as the server's absolute path, except to staff.

The preview (owners and CHANGE holders of the flow, and staff: who may read its data, as for its
bad records — ``status.can_act``, the access module's decision) reads at most
:data:`PREVIEW_ROWS` rows: files with pyarrow by their real paths inside the node's root (the same
confinement as every job's paths), a table with a bounded ``SELECT`` through the connection rules
of Test connection (``topology.connections.preview_table``), an Iceberg table with a scan limited
to those rows (``preview_iceberg``: a catalog that needs no password); a table only when the
flow's owner owns it (``topology.tables``). An output is named by its job and its
place in the job's list, never by a path the browser sends.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import os
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.urls import reverse

from portal.accounts.access import Principal
from portal.orchestration import redaction, status
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.pipeline import filepreview
from portal.pipeline.confinement import ConfinementError, is_inside
from portal.pipeline.destinations.published import FILES, ICEBERG, JDBC, Published, published
from portal.topology import connections, tables
from portal.topology.models import DataNode
from portal.topology.reach import node_root

PREVIEW_ROWS = 20
PREVIEW_COLUMNS = 12  # at most this many columns, the first ones
PREVIEW_WIDTH = 60  # characters of one value shown
PREVIEW_DENIED = "Only the flow's owners and staff may preview its data."


class PreviewGone(Exception):
    """The dataset, or the part of it the execution delivered, is no longer there (or cannot be
    read); the message says which, for a 404."""


@dataclass
class Output:
    """One dataset as a job published it, as one reader may see it."""

    job_name: str
    index: int
    node: str
    kind: str
    dataset_urn: str
    format: str
    records: int
    files: int | None  # files only
    where: str  # the folder relative to the node, or the table
    absolute: str = ""  # the folder as the server names it: staff only
    preview_url: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Preview:
    output: Output
    columns: list[str]
    rows: list[list[str]]
    more_columns: int = 0
    note: str = ""
    missing: list[str] = field(default_factory=list)

    @property
    def labelled_rows(self) -> list[list[tuple[str, str]]]:
        """Each row's values with their column's name (a phone shows each row as a card)."""
        return [list(zip(self.columns, row, strict=False)) for row in self.rows]


def _destination(job: JobExecution) -> str:
    return str((job.spec.get("properties") or {}).get("flowport.hop.destination") or "")


def _files_root(node: DataNode | None) -> str | None:
    path = (node.properties or {}).get("path") if node is not None else None
    return node_root(path) if isinstance(path, str) and path else None


def _relative(location: str, root: str | None) -> str | None:
    """`location` relative to the node's root, or None when it is not under it."""
    if not root or not is_inside(location, root):
        return None
    relative = os.path.relpath(os.path.realpath(location), os.path.realpath(root))
    return "" if relative == "." else relative.replace(os.sep, "/")


def _qualified(table: str, node: DataNode | None) -> str | None:
    """A JDBC table as its database names it (``public.orders``; MySQL's in the URL's database)."""
    url = str((node.properties or {}).get("url") or "") if node is not None else ""
    return tables.named_table(JDBC, {"writer.jdbc.table": table, "writer.jdbc.url": url}, "")


def _committed(execution: FlowExecution) -> list[JobExecution]:
    jobs = [job for job in execution.jobs.all() if job.status == JobStatus.COMMITTED]
    return sorted(jobs, key=lambda job: (job.hop_index, job.job_name))


def _shown(
    job: JobExecution, index: int, entry: Published, nodes: dict[str, DataNode], user: Principal
) -> Output:
    node_name = _destination(job)
    node = nodes.get(node_name)
    staff = redaction.sees_everything(user)
    where, absolute = entry.location, ""
    if entry.kind == FILES:
        relative = _relative(entry.location, _files_root(node))
        if relative is None:  # not under its node (a node changed since): as the messages say it
            where = redaction.for_viewer(user)(entry.location)
        else:
            where = relative or "(the node's root)"
        absolute = entry.location if staff else ""
    elif entry.kind == JDBC:
        where = _qualified(entry.location, node) or entry.location
    execution = job.execution
    return Output(
        job_name=job.job_name,
        index=index,
        node=node_name,
        kind=entry.kind,
        dataset_urn=entry.dataset_urn,
        format=entry.format,
        records=entry.records,
        files=len(entry.files) if entry.kind == FILES else None,
        where=where,
        absolute=absolute,
        preview_url=reverse(
            "orchestration:preview",
            args=[execution.flow_group, execution.flow_name, execution.execution_id, job.job_name, index],
        ),
    )


def of_execution(execution: FlowExecution, user: Principal) -> list[Output]:
    """Where each dataset of `execution` went, by hop and job, as `user` may read it."""
    jobs = _committed(execution)
    names = {_destination(job) for job in jobs}
    nodes = {node.name: node for node in DataNode.objects.filter(name__in=names)}
    found: list[Output] = []
    for job in jobs:
        for index, entry in enumerate(published(job.spec, job.task_states or [])):
            found.append(_shown(job, index, entry, nodes, user))
    return found


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        text = value.hex()
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        text = value.isoformat()
    elif isinstance(value, decimal.Decimal):
        text = format(value, "f")
    else:
        text = str(value)
    return text if len(text) <= PREVIEW_WIDTH else text[: PREVIEW_WIDTH - 1] + "…"


def preview(execution: FlowExecution, job_name: str, index: int, user: Principal) -> Preview:
    """The first rows of output `index` of job `job_name` of `execution` (which `user` already
    sees). PermissionDenied for whoever may not read the flow's data; PreviewGone when it is not
    there to read."""
    if not status.can_act(user, execution):
        raise PermissionDenied(PREVIEW_DENIED)
    job = execution.jobs.filter(job_name=job_name, status=JobStatus.COMMITTED).first()
    entries = published(job.spec, job.task_states or []) if job is not None else []
    if job is None or not 0 <= index < len(entries):
        raise PreviewGone("No such dataset in this execution: it delivered nothing there.")
    entry = entries[index]
    node = DataNode.objects.filter(name=_destination(job)).first()
    if node is None:
        raise PreviewGone(f"The data node '{_destination(job)}' the dataset went to no longer exists.")
    output = _shown(job, index, entry, {node.name: node}, user)
    if entry.kind == FILES:
        columns, rows, missing = _files(entry, node, execution)
    elif entry.kind == JDBC:
        columns, rows, missing = _table(entry, node, execution)
    elif entry.kind == ICEBERG:
        columns, rows, missing = _lake_table(entry, node, execution)
    else:  # pragma: no cover - published() names no other kind
        raise PreviewGone("No preview of this kind of destination.")
    shown = [[_cell(value) for value in row[:PREVIEW_COLUMNS]] for row in rows[:PREVIEW_ROWS]]
    note = ""
    if entry.kind in (JDBC, ICEBERG):
        note = "The table's first rows now: later runs may have changed them."
    elif missing:
        note = f"{len(missing)} of the {len(entry.files)} file(s) it delivered are no longer there."
    return Preview(
        output,
        columns[:PREVIEW_COLUMNS],
        shown,
        more_columns=max(0, len(columns) - PREVIEW_COLUMNS),
        note=note,
        missing=missing,
    )


def _files(
    entry: Published, node: DataNode, execution: FlowExecution
) -> tuple[list[str], list[tuple[Any, ...]], list[str]]:
    """Read inside the flow's own folder of the node, ``<root>/<flowGroup>/<flowName>`` (where
    the worker's guard lets it publish, whatever its states say): neither another flow's
    folder in the same node nor anything a link leads to elsewhere."""
    root = _files_root(node)
    if root is None or "://" in root:
        raise PreviewGone(f"The portal previews local files only; the workers read node '{node.name}'.")
    if not entry.files:
        raise PreviewGone("This execution delivered no file to this dataset.")
    own = os.path.join(root, execution.flow_group, execution.flow_name)
    try:
        rows = filepreview.first_rows(entry.location, entry.files, own, entry.format, PREVIEW_ROWS)
    except ConfinementError as error:
        raise PreviewGone(f"Refused: {error}") from error
    except filepreview.PreviewError as error:
        raise PreviewGone(str(error)) from error
    return rows.columns, rows.rows, rows.missing


def _table(
    entry: Published, node: DataNode, execution: FlowExecution
) -> tuple[list[str], list[tuple[Any, ...]], list[str]]:
    """Only a table the flow's owner owns in the node (topology.tables: the one the flow created,
    or, for the node's owners, one that was there): the flow's data, not a neighbour's."""
    flow = execution.flow
    owner = flow.owner if flow is not None else None
    name = _qualified(entry.location, node) or entry.location
    if owner is None or tables.refusal(owner, node, name, exists=True):
        raise PreviewGone(f"No preview: table {name} of data node '{node.name}' is not the flow's.")
    try:
        rows = connections.preview_table(node, entry.location, PREVIEW_ROWS)
    except connections.PreviewRefused as error:
        raise PreviewGone(str(error)) from error
    return rows.columns, rows.rows, []


def _lake_table(
    entry: Published, node: DataNode, execution: FlowExecution
) -> tuple[list[str], list[tuple[Any, ...]], list[str]]:
    """An Iceberg table the flow's owner owns in the node, scanned for its first rows."""
    flow = execution.flow
    owner = flow.owner if flow is not None else None
    if owner is None or tables.refusal(owner, node, entry.location, exists=True):
        raise PreviewGone(f"No preview: table {entry.location} of data node '{node.name}' is not the flow's.")
    try:
        rows = connections.preview_iceberg(node, entry.location, PREVIEW_ROWS)
    except connections.PreviewRefused as error:
        raise PreviewGone(str(error)) from error
    return rows.columns, rows.rows, []
