"""The JobSpec: everything one pipeline run needs, as plain JSON.

The orchestration layer builds it (resolved properties, previous watermarks from the state store)
and ships it to an executor; ``run_job`` never reads anything else, so a JobSpec file is enough to
re-run a job by hand with ``python -m portal.pipeline run jobspec.json``.

Fields (JSON keys are the attribute names):

==========================  ======================================================================
``job_name``                str, required.
``flow_group``/``flow_name`` str, identify the flow (informational for the pipeline).
``execution_id``            int, the FlowExecution id; part of every staging/output path and of the
                            JDBC publish marker, so a retried execution reuses its own paths.
``properties``              dict[str, str], resolved Gobblin-style keys.
``previous_watermarks``     dict[dataset_urn, str], actual high watermarks of the last committed run.
``work_dir``                str (path or Hadoop URI): ``task-staging/``, ``task-output/``, ``err/``
                            and ``extract/`` live under it unless ``writer.staging.dir`` /
                            ``writer.output.dir`` / ``qualitychecker.row.err.file`` say otherwise.
``previous_schemas``        dict[dataset_urn, str] (optional): the ``source_schema`` JSON a previous
                            TaskState reported; read by ``SchemaCompatibilityPolicy``.
``extra``                   any other keys of the input dict, kept and written back unchanged.
==========================  ======================================================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from portal.pipeline.errors import ConfigError

_KNOWN = (
    "job_name",
    "flow_group",
    "flow_name",
    "execution_id",
    "properties",
    "previous_watermarks",
    "work_dir",
    "previous_schemas",
)


def _str_map(data: Any, name: str) -> dict[str, str]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"jobspec field '{name}' must be an object of strings")
    return {str(k): "" if v is None else str(v) for k, v in data.items()}


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
    extra: dict[str, Any] = field(default_factory=dict)

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
            execution_id=execution_id,
            properties=_str_map(data.get("properties"), "properties"),
            previous_watermarks=_str_map(data.get("previous_watermarks"), "previous_watermarks"),
            work_dir=work_dir,
            previous_schemas=_str_map(data.get("previous_schemas"), "previous_schemas"),
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
        )
        return data
