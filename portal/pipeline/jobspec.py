"""The JobSpec: everything one pipeline run needs, as plain JSON.

The orchestration layer builds it (resolved properties, previous watermarks from the state store)
and ships it to an executor; ``run_job`` never reads anything else, so a JobSpec file is enough to
re-run a job by hand with ``python -m portal.pipeline run jobspec.json``.

Fields (JSON keys are the attribute names):

==========================  ======================================================================
``job_name``                str, required.
``flow_group``/``flow_name`` str, identify the flow (informational for the pipeline).
``flow_id``                 int (optional): the flow's id in the portal, whose state the job reads
                            and writes (informational for the pipeline).
``execution_id``            int, the FlowExecution id; part of every staging/output path and of the
                            JDBC publish marker, so a retried execution reuses its own paths.
``properties``              dict[str, str], resolved Gobblin-style keys.
``previous_watermarks``     dict[dataset_urn, str], actual high watermarks of the last committed run.
``work_dir``                str (path or Hadoop URI): ``task-staging/``, ``task-output/``, ``err/``
                            and ``extract/`` live under it unless ``writer.staging.dir`` /
                            ``writer.output.dir`` / ``qualitychecker.row.err.file`` say otherwise.
``previous_schemas``        dict[dataset_urn, str] (optional): the ``source_schema`` JSON a previous
                            TaskState reported; read by ``SchemaCompatibilityPolicy``.
``backfill``                dict[dataset_urn, {"low": str, "high": str}] (optional): a *backfill*
                            run.  Only the listed datasets run; each reads exactly its
                            ``(low, high]`` range (``high`` clamped to what the source holds; an
                            empty or null ``low`` means from the first record), the previous
                            watermark is ignored, and ``plan_commit`` emits no ``high_watermark``
                            step for it, so the stored watermark never moves.  Values are written in
                            the source's watermark form (see docs/pipeline.md, "Backfill").
``log_tag``                 str (optional): tags the Spark driver's log lines of this run (see
                            ``portal.pipeline.logtag``), so a shared session's log can be split
                            per job.
``extra``                   any other keys of the input dict, kept and written back unchanged.
==========================  ======================================================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from portal.pipeline import nodekinds
from portal.pipeline.errors import ConfigError
from portal.pipeline.nodekinds.jdbc import url_has_login as url_has_login  # topology.policy, usernode
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import base_key


def with_node_credentials(properties: dict[str, str]) -> dict[str, str]:
    """``properties`` with the hop's nodes' credentials, as their kinds decide
    (`portal.pipeline.nodekinds`, e.g. a JDBC node's login): a node that has a login gives it,
    whatever the flow says; a flow's own user and password are kept, whole, only for a node
    without one. Every spelling a component reads is replaced: a branch's writer reads
    ``writer.jdbc.username.N`` first, so the ``.N`` keys go."""
    merged = dict(properties)
    for role in nodekinds.ROLES:
        kind, node = nodekinds.hop_node(merged, role)
        decided = nodekinds.credentials(kind, role, node)
        if not decided:
            continue
        for key in [k for k in merged if k != base_key(k) and base_key(k) in decided]:
            merged.pop(key)
        for key, value in decided.items():
            if value:
                merged[key] = value
            else:
                merged.pop(key, None)
    return merged


_KNOWN = (
    "job_name",
    "flow_group",
    "flow_name",
    "flow_id",
    "execution_id",
    "properties",
    "previous_watermarks",
    "work_dir",
    "previous_schemas",
    "backfill",
    "log_tag",
)


def _str_map(data: Any, name: str) -> dict[str, str]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"jobspec field '{name}' must be an object of strings")
    return {str(k): "" if v is None else str(v) for k, v in data.items()}


def _flow_id(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError("jobspec field 'flow_id' must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError("jobspec field 'flow_id' must be an integer") from None


def _bound(value: Any, where: str, key: str, required: bool) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ConfigError(f"{where}: '{key}' is required (the inclusive upper watermark of the range)")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where}: '{key}' must be a watermark string, got {type(value).__name__}")
    return str(value).strip()


def _backfill(data: Any) -> dict[str, dict[str, str | None]]:
    """Validate ``backfill``: ``{dataset_urn: {"low": str | null, "high": str}}``."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            'jobspec field \'backfill\' must be an object {dataset_urn: {"low": ..., "high": ...}}'
        )
    result: dict[str, dict[str, str | None]] = {}
    for urn, bounds in data.items():
        if not isinstance(urn, str) or not urn.strip():
            raise ConfigError("jobspec field 'backfill': dataset URNs must be non-empty strings")
        where = f"jobspec field 'backfill' ['{urn}']"
        if not isinstance(bounds, dict):
            raise ConfigError(f'{where} must be an object {{"low": ..., "high": ...}}')
        unknown = sorted(str(k) for k in bounds if k not in ("low", "high"))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (expected 'low' and 'high')")
        low = _bound(bounds.get("low"), where, "low", required=False)
        high = _bound(bounds.get("high"), where, "high", required=True)
        if low is not None and low == high:
            raise ConfigError(f"{where}: 'low' and 'high' are equal, the range (low, high] is empty")
        result[urn.strip()] = {"low": low, "high": high}
    return result


@dataclass
class JobSpec:
    """A resolved job, ready to run; see the module docstring for the fields."""

    job_name: str
    flow_group: str = ""
    flow_name: str = ""
    execution_id: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    previous_watermarks: dict[str, str] = field(default_factory=dict)
    work_dir: str = ""
    previous_schemas: dict[str, str] = field(default_factory=dict)
    backfill: dict[str, dict[str, str | None]] = field(default_factory=dict)
    log_tag: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    flow_id: int | None = None
    # The flow owner's customer key, unwrapped by the worker for column rules
    # (portal.pipeline.columns): in this process's memory only, never in to_dict or a repr.
    column_key: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def is_backfill(self) -> bool:
        """True when this run is a backfill (only the datasets in ``backfill`` run)."""
        return bool(self.backfill)

    @cached_property
    def props(self) -> Properties:
        """The job-level view of ``properties``, built once per JobSpec: a run hands the one parsed
        JobSpec from planning to commit, and ``properties`` is not changed after parsing (a narrowed
        run is a new JobSpec, see ``dataclasses.replace``)."""
        return Properties(with_node_credentials(self.properties))

    @property
    def job_work_dir(self) -> str:
        """The work dir: ``work_dir``, else the ``job.work.dir`` property, else ``""`` (none)."""
        return self.work_dir or self.props.get("job.work.dir") or ""

    @classmethod
    def from_dict(cls, data: dict[str, Any] | JobSpec) -> JobSpec:
        """Validate and build; a bad field raises ConfigError naming the field."""
        if isinstance(data, JobSpec):
            return data
        if not isinstance(data, dict):
            raise ConfigError("jobspec must be a JSON object")
        job_name = data.get("job_name")
        if not isinstance(job_name, str) or not job_name.strip():
            raise ConfigError("jobspec field 'job_name' is required and must be a non-empty string")
        try:
            execution_id = int(data.get("execution_id", 0))
        except (TypeError, ValueError):
            raise ConfigError("jobspec field 'execution_id' must be an integer") from None
        work_dir = data.get("work_dir") or ""
        if not isinstance(work_dir, str):
            raise ConfigError("jobspec field 'work_dir' must be a string path or URI")
        return cls(
            job_name=job_name.strip(),
            flow_group=str(data.get("flow_group") or ""),
            flow_name=str(data.get("flow_name") or ""),
            flow_id=_flow_id(data.get("flow_id")),
            execution_id=execution_id,
            properties=_str_map(data.get("properties"), "properties"),
            previous_watermarks=_str_map(data.get("previous_watermarks"), "previous_watermarks"),
            work_dir=work_dir,
            previous_schemas=_str_map(data.get("previous_schemas"), "previous_schemas"),
            backfill=_backfill(data.get("backfill")),
            log_tag=str(data.get("log_tag") or ""),
            extra={k: v for k, v in data.items() if k not in _KNOWN},
        )

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data.update(
            job_name=self.job_name,
            flow_group=self.flow_group,
            flow_name=self.flow_name,
            execution_id=self.execution_id,
            properties=dict(self.properties),
            previous_watermarks=dict(self.previous_watermarks),
            work_dir=self.work_dir,
            previous_schemas=dict(self.previous_schemas),
            backfill={urn: dict(bounds) for urn, bounds in self.backfill.items()},
        )
        if self.flow_id is not None:
            data["flow_id"] = self.flow_id
        if self.log_tag:
            data["log_tag"] = self.log_tag
        return data
