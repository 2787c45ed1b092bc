"""Where a finished job's datasets went: one :class:`Published` per (dataset, branch) its commit
published, read back from the job's spec and TaskStates by the rules the commit plan follows
(:func:`portal.pipeline.destinations.commitplan.plan_commit`).

A files branch published its task-output files into ``data.publisher.final.dir(.N)`` (plus the
dataset's own folder unless ``data.publisher.dataset.subdir`` is false), keeping each file's path
relative to the task-output folder; a JDBC branch into its target table; an Iceberg branch into
``namespace.table`` of its catalog. The bad records' files (``_errors/``) are not the dataset's.
Paths are confined to the branch's publish root as the plan confines them, so a task state that
names a folder elsewhere yields nothing. No Django here: the portal asks it for the execution page
and the REST API (``portal.orchestration.outputs``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from portal.pipeline import badrows, fs, nodekinds
from portal.pipeline.confinement import ConfinementError, confine
from portal.pipeline.destinations import iceberg, table_templates
from portal.pipeline.destinations.commitplan import apply_commit_policy
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.taskstate import SUCCEEDED

# The kind of node a branch published into, by the node kinds' own names.
FILES, JDBC, ICEBERG = (nodekinds.files.KIND.name, nodekinds.jdbc.KIND.name, nodekinds.iceberg.KIND.name)


@dataclass
class Published:
    """One dataset's branch as its commit published it. ``location``: the absolute folder (files),
    the table (JDBC, as the flow named it) or ``namespace.table`` (Iceberg); ``root``: the
    publish root the folder lies in (files only); ``files``: the published files' paths relative
    to ``location`` (files only)."""

    dataset_urn: str
    branch: int
    kind: str
    location: str
    format: str = ""
    records: int = 0
    root: str = ""
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _files_place(bprops: Any, branch: dict[str, Any], urn: str) -> tuple[str, str]:
    root = bprops.require("data.publisher.final.dir")
    final = confine(branch.get("final_dir") or root, root, "data.publisher.final.dir")
    if bprops.get_bool("data.publisher.dataset.subdir", True):
        final = confine(fs.join(final, urn), root, f"dataset '{urn}'")
    return final, root


def published(jobspec: dict[str, Any] | JobSpec, task_states: list[dict[str, Any]]) -> list[Published]:  # noqa: C901
    """What the job's commit published, per dataset and branch, in dataset then branch order. A
    branch whose place cannot be told (a bad property, a path out of its root) is left out, and
    so is everything of a job whose spec or states are not a job's (one that never ran)."""
    try:
        spec = JobSpec.from_dict(jobspec)
        tasks = apply_commit_policy(spec, task_states or [])
    except (ConfigError, KeyError, TypeError, AttributeError):
        return []
    props = spec.props
    found: dict[tuple[str, int], Published] = {}
    for task in tasks:
        if not task.get("committed"):
            continue
        urn = str(task.get("dataset_urn") or "")
        branches = task.get("branches") or []
        for branch in branches:
            if branch.get("status") != SUCCEEDED:
                continue
            index = int(branch.get("index") or 0)
            bprops = props.for_branch(index, len(branches), branch.get("name") or "")
            fmt = str(branch.get("format") or "").upper()
            try:
                if fmt == iceberg.FORMAT:
                    table = iceberg.table_spec(bprops, spec, urn)
                    entry = Published(urn, index, ICEBERG, f"{table['namespace']}.{table['table']}", fmt)
                elif branch.get("staging_table"):
                    entry = Published(urn, index, JDBC, table_templates.target(bprops, urn), "JDBC")
                else:
                    final, root = _files_place(bprops, branch, urn)
                    entry = Published(urn, index, FILES, final, fmt or "PARQUET", root=root)
            except (ConfigError, ConfinementError, KeyError, ValueError):
                continue
            entry = found.setdefault((urn, index), entry)
            entry.records += int(branch.get("records_written") or 0)
            if entry.kind == FILES:
                base = str(branch.get("output_dir") or "").rstrip("/")
                for output in branch.get("output_files") or []:
                    if base and not badrows.set_aside(output["path"], base):
                        entry.files.append(str(output["path"])[len(base) :].lstrip("/\\"))
    return [found[key] for key in sorted(found)]
