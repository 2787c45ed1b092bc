"""Commit planning: which task outputs to publish and which watermark to check in, per dataset.

The pipeline only *computes* the commit; the orchestration layer stores the steps in its
CommitStepStore and executes them (:mod:`portal.pipeline.destinations.commit_steps`), so publish + watermark
become atomic (Gobblin's exactly-once design).

``plan_commit(jobspec, task_states) -> dict[dataset_urn, list[step dict]]``.  Steps, in order:
``{"type": "fs_rename", "src", "dst", "size", "dataset_urn", "branch"}`` for every task-output file
of a committed task (to ``data.publisher.final.dir(.N)/<dataset_urn>/<relative path>``; set
``data.publisher.dataset.subdir(.N)=false`` to drop the ``<dataset_urn>`` level),
``{"type": "jdbc_publish", ...}`` once per (dataset, JDBC branch), ``{"type": "iceberg_commit", ...}``
once per (dataset, Iceberg branch) (:mod:`portal.pipeline.destinations.iceberg`), one per branch that staged bad
records for its error table (:mod:`portal.pipeline.destinations.badtables`), and last
``{"type": "high_watermark", "dataset_urn", "value"}``.

``job.commit.policy`` (default ``full``):

* ``full``: any task of the job not SUCCEEDED -> nothing is published for any dataset.
* ``partial``: a dataset is published when all of its tasks SUCCEEDED (dataset-level).
* ``successful``: task-level — a dataset's ranges are committed in watermark order up to the first
  task that did not succeed; later ranges are not published even if they succeeded, because the
  watermark cannot move past the failed range (the next run re-reads from there, exactly once).

A task with a failed fork branch is a failed task: none of its branches is published under any
policy.  A dataset with nothing committed still gets its ``high_watermark`` step, with its previous
(low) watermark, so its state is saved and the next run retries exactly those work units.

A backfill job (``JobSpec.backfill``) publishes its datasets by the same rules but emits **no**
``high_watermark`` step at all: the stored watermarks never move (neither back to
the backfill's range nor forward).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

from portal.pipeline import backfills, badrows, fs, usernode, watermarks
from portal.pipeline.confinement import confine
from portal.pipeline.destinations import badtables, iceberg, table_templates, write_modes
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.taskstate import SUCCEEDED


def commit_policy(props: Properties) -> str:
    policy = props.get_choice("job.commit.policy") or "full"  # the schema's values and message
    aliases = {
        "commit_on_full_success": "full",
        "commit_on_partial_success": "partial",
        "commit_successful_tasks": "successful",
    }
    return aliases.get(policy, policy)


def _by_dataset(states: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for state in states:
        grouped[state["dataset_urn"]].append(state)
    for tasks in grouped.values():
        tasks.sort(key=lambda t: ((t.get("work_unit") or {}).get("range_index", 0), t["task_id"]))
    return dict(grouped)


def apply_commit_policy(
    jobspec: dict[str, Any] | JobSpec, task_states: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Copies of the TaskStates with ``committed`` set, and the actual high watermark of every task
    that will not be committed set back to its low watermark."""
    policy = commit_policy(JobSpec.from_dict(jobspec).props)
    states = copy.deepcopy(task_states)
    job_ok = all(s["status"] == SUCCEEDED for s in states)
    for tasks in _by_dataset(states).values():
        dataset_ok = all(t["status"] == SUCCEEDED for t in tasks)
        prefix_ok = True
        for task in tasks:
            ok = task["status"] == SUCCEEDED
            prefix_ok = prefix_ok and ok
            task["committed"] = {"full": job_ok, "partial": dataset_ok, "successful": prefix_ok}[policy]
            if not task["committed"]:
                task["actual_high_watermark"] = task.get("low_watermark")
    return states


def _strip_password(url: str) -> str:
    if "?" not in url:
        return url
    parsed = urlparse(url[len("jdbc:") :]) if url.startswith("jdbc:") else urlparse(url)
    query = urlencode([(k, v) for k, v in parse_qsl(parsed.query) if k.lower() != "password"])
    rebuilt = urlunparse(parsed._replace(query=query))
    return "jdbc:" + rebuilt if url.startswith("jdbc:") else rebuilt


def _branch_props(props: Properties, branch: dict[str, Any], count: int) -> Properties:
    return props.for_branch(branch["index"], count, branch["name"])


def _existing_key(props: Properties, key: str) -> str | None:
    for name in props.candidates(key):
        if props.raw.get(name):
            return name
    return None


def _jdbc_table(bprops: Properties, urn: str) -> str:
    """The dataset's target, ``{table}`` put in as the writer did (and checked again: a task state
    does not choose where rows go)."""
    return table_templates.target(bprops, urn)


def _backfill_range(spec: JobSpec, bprops: Properties, urn: str) -> dict[str, Any] | None:
    """What an appending JDBC branch of a backfill replaces: the target's rows whose watermark
    column lies in the backfill's range (low exclusive, high inclusive, as the source reads it)."""
    bounds = spec.backfill.get(urn)
    order = bprops.get_list("extract.delta.fields")
    if not bounds or not order:
        return None
    return {
        "column": order[0],
        "low": watermarks.value_of(bounds["low"]) if bounds.get("low") else None,
        "high": watermarks.value_of(bounds["high"]) if bounds.get("high") else None,
    }


def _rereads_all(spec: JobSpec, urn: str) -> bool:
    """A backfill from the first record up to (at least) the stored watermark: every load again."""
    bounds = spec.backfill.get(urn) or {}
    stored = spec.previous_watermarks.get(urn)
    return backfills.covers_everything(bounds.get("low"), bounds.get("high") or "", stored)


def _retired(spec: JobSpec, urn: str, branch: dict[str, Any]) -> list[str] | None:
    """The files (relative to the dataset's folder) that the loads a backfill reads again published
    on this branch, as the orchestrator found them (``backfill_replaces``); None when it named none
    for ``urn`` (:mod:`portal.orchestration.control.replays`)."""
    named = (spec.extra.get("backfill_replaces") or {}).get(urn)
    if named is None:
        return None
    return [str(f["relative"]) for f in named if int(f.get("branch") or 0) == int(branch["index"])]


def _replace_step(
    spec: JobSpec,
    urn: str,
    final: str,
    bprops: Properties,
    branch: dict[str, Any],
    partitions: bool,
    whole: bool = False,
) -> dict[str, Any]:
    fields = write_modes.resolve(bprops, branch.get("format") or "PARQUET").step_fields()
    mode = "overwrite" if partitions or whole else fields.pop("write_mode")
    fields.pop("write_mode", None)
    return {
        "type": "fs_replace",
        "dataset_urn": urn,
        "branch": branch["index"],
        "final": final,
        "mode": mode,
        "format": branch.get("format") or "PARQUET",
        "files": [],
        "token": f"{spec.job_name}:{spec.execution_id}:{urn}",
        "partitions": partitions,
        **fields,
    }


def _set_aside_step(
    output_file: dict[str, Any], base: str, final: str, root: str, urn: str, index: int
) -> dict[str, Any]:
    relative = output_file["path"][len(base) :].lstrip("/\\")
    return {
        "type": "fs_rename",
        "src": output_file["path"],
        "dst": confine(fs.join(final, relative), root, f"dataset '{urn}'"),
        "size": output_file.get("size"),
        "dataset_urn": urn,
        "branch": index,
    }


def plan_commit(  # noqa: C901, PLR0915
    jobspec: dict[str, Any] | JobSpec, task_states: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Commit steps per dataset URN (see the module docstring)."""
    spec = JobSpec.from_dict(jobspec)
    props = spec.props
    plan: dict[str, list[dict[str, Any]]] = {}
    for urn, tasks in _by_dataset(apply_commit_policy(spec, task_states)).items():
        steps: list[dict[str, Any]] = []
        jdbc: dict[int, dict[str, Any]] = {}
        lake: dict[int, dict[str, Any]] = {}  # iceberg_commit steps by branch
        errors: dict[int, dict[str, Any]] = {}  # the error tables' steps by branch (badtables)
        later: list[tuple[dict[str, Any], str, str, str, int]] = []  # bad-record files after a replace
        replacing: dict[str, dict[str, Any]] = {}  # fs_replace steps by dataset folder
        committed = [t for t in tasks if t["committed"]]
        for task in committed:
            count = len(task["branches"])
            for branch in task["branches"]:
                if branch["status"] != SUCCEEDED:
                    continue
                bprops = _branch_props(props, branch, count)
                if branch.get("format") == iceberg.FORMAT:
                    iceberg.add_branch(lake, spec, urn, bprops, branch)
                    badtables.add_steps(errors, lake[branch["index"]], branch, urn)
                    continue
                if branch.get("staging_table"):
                    step = jdbc.setdefault(
                        branch["index"],
                        {
                            "type": "jdbc_publish",
                            "dataset_urn": urn,
                            "branch": branch["index"],
                            "url": _strip_password(bprops.require("writer.jdbc.url")),
                            "user": bprops.get("writer.jdbc.username"),
                            "password_property": _existing_key(bprops, "writer.jdbc.password"),
                            "target_table": _jdbc_table(bprops, urn),
                            "marker_table": bprops.get("writer.jdbc.marker.table", "flowport_publish_marker"),
                            "staging_tables": [],
                            "rows": 0,
                            "execution_id": spec.execution_id,
                            "job_name": spec.job_name,
                            "evolve": props.get_choice("schema.evolution.policy") == "evolve",
                            "user_node": usernode.spec_entry(spec.extra, "destination"),
                            **write_modes.resolve(bprops, "JDBC").step_fields(),
                        },
                    )
                    if spec.is_backfill and step["write_mode"] == "append":
                        step["replace_range"] = _backfill_range(spec, bprops, urn)
                    step["staging_tables"].append(branch["staging_table"])
                    step["rows"] += int(branch["records_written"])
                    badtables.add_steps(errors, step, branch, urn)
                    continue
                # Every published file stays inside the branch's publish dir: a dataset URN or a
                # task state (a cluster driver's, say) cannot steer it elsewhere with '..'.
                root = bprops.require("data.publisher.final.dir")
                final = confine(branch.get("final_dir") or root, root, "data.publisher.final.dir")
                if bprops.get_bool("data.publisher.dataset.subdir", True):
                    final = confine(fs.join(final, urn), root, f"dataset '{urn}'")
                base = branch["output_dir"].rstrip("/")
                mode = write_modes.resolve(bprops, branch.get("format") or "PARQUET").mode
                # A backfill of a partitioned dataset replaces the partitions it wrote again.
                partitions = (
                    spec.is_backfill
                    and mode == "append"
                    and bool(bprops.get_list("writer.partition.columns"))
                )
                whole = spec.is_backfill and mode == "append" and not partitions and _rereads_all(spec, urn)
                # A backfill of part of an unpartitioned dataset swaps the files its loads published.
                retire = _retired(spec, urn, branch) if spec.is_backfill and mode == "append" else None
                swap = not partitions and not whole and retire is not None
                if mode != "append" or partitions or whole or swap:
                    step = replacing.setdefault(
                        final, _replace_step(spec, urn, final, bprops, branch, partitions, whole)
                    )
                    if swap:
                        step.update(mode="swap", retire=retire)
                    step["files"].extend(
                        {
                            "src": f["path"],
                            "relative": f["path"][len(base) :].lstrip("/\\"),
                            "size": f.get("size"),
                        }
                        for f in branch["output_files"]
                        if not badrows.set_aside(f["path"], base)
                    )
                    # A replacing publish reads or swaps the dataset's data; the bad records' file
                    # joins the new folder after it, as in an appending one.
                    later.extend(
                        (f, base, final, root, branch["index"])
                        for f in branch["output_files"]
                        if badrows.set_aside(f["path"], base)
                    )
                    continue
                for f in branch["output_files"]:
                    relative = f["path"][len(base) :].lstrip("/\\")
                    steps.append(
                        {
                            "type": "fs_rename",
                            "src": f["path"],
                            "dst": confine(fs.join(final, relative), root, f"dataset '{urn}'"),
                            "size": f.get("size"),
                            "dataset_urn": urn,
                            "branch": branch["index"],
                        }
                    )
        steps.extend(step for step in replacing.values() if step["files"])
        steps.extend(
            _set_aside_step(f, base, final, root, urn, index) for f, base, final, root, index in later
        )
        steps.extend(jdbc[i] for i in sorted(jdbc))
        if committed:
            value = watermarks.merge([t["actual_high_watermark"] for t in committed])
        else:
            value = tasks[0].get("low_watermark")
        steps.extend(iceberg.finish_steps(lake, value, spec.is_backfill))
        steps.extend(errors[i] for i in sorted(errors))  # with the run, before its watermark
        if value is not None and not spec.is_backfill:
            steps.append({"type": "high_watermark", "dataset_urn": urn, "value": value})
        plan[urn] = steps
    return plan


def cleanup_task_output(jobspec: dict[str, Any] | JobSpec) -> None:
    """Delete this execution's task-staging/task-output/extract folders under the work dir (call it
    after the commit steps ran; custom ``writer.*.dir`` locations are left to their owners)."""
    spec = JobSpec.from_dict(jobspec)
    remove_task_output(spec.job_work_dir, spec.job_name, spec.execution_id)


def remove_task_output(work_dir: str, job_name: str, execution_id: int) -> None:
    """:func:`cleanup_task_output` for a run known by its work dir, job and execution only."""
    if not work_dir:
        return
    for leaf in ("task-staging", "task-output", "extract"):
        fs.delete(fs.join(work_dir, leaf, job_name, str(execution_id)))
