"""What the compiler hands to the orchestrator: plain dataclasses, JSON-able
through `to_dict()` with the API's camelCase names."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from portal.pipeline.destinations import table_templates
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

COMPILED, PENDING, FAILED = "COMPILED", "PENDING", "FAILED"


@dataclass
class JobSpecPlan:
    """One JobSpec bound to one SpecExecutor: a hop of the flow."""

    job_name: str
    hop_index: int
    source_node: str
    destination_node: str
    executor: str
    technology: str
    location: str
    queue: str
    spark_master: str
    spark_conf: dict[str, str]
    parents: list[str]
    properties: dict[str, str]
    serves_destinations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The datasets a table pattern matched at save (portal.flows.tablesets), or why it was not matched.
    datasets: list[str] = field(default_factory=list)
    datasets_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobName": self.job_name,
            "hopIndex": self.hop_index,
            "sourceNode": self.source_node,
            "destinationNode": self.destination_node,
            "executor": self.executor,
            "technology": self.technology,
            "location": self.location,
            "queue": self.queue,
            "sparkMaster": self.spark_master,
            "sparkConf": dict(self.spark_conf),
            "parents": list(self.parents),
            "servesDestinations": list(self.serves_destinations),
            "properties": dict(self.properties),
            "errors": list(self.errors),
            # Only a job whose table patterns were matched at save or preview says what they matched.
            **({"datasets": list(self.datasets)} if self.datasets else {}),
            **({"datasetsNote": self.datasets_note} if self.datasets_note else {}),
        }

    def destination_tables(self) -> list[str]:
        """Where a first hop into a database puts each table it reads (``writer.jdbc.table`` with
        ``{table}`` filled in), so the preview says it before the flow runs; the template itself where
        a name cannot be filled in."""
        props = Properties(self.properties)
        if self.parents or props.get("flowport.hop.destination.kind") != "jdbc":
            return []
        template = table_templates.target_template(props)
        datasets = (
            self.datasets or props.get_list("source.jdbc.tables") or props.get_list("source.cdc.tables")
        )
        if not table_templates.has_placeholder(template) or not datasets:
            return [template]
        found = []
        for urn in datasets:
            try:
                found.append(table_templates.resolve(template, urn, table_templates.KEY))
            except ConfigError:  # a pattern, or a name the worker refuses (it says why)
                found.append(template)
        return list(dict.fromkeys(found))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpecPlan:
        """A plan read back from its `to_dict()` (a stored DAG)."""
        return cls(
            job_name=data["jobName"],
            hop_index=data["hopIndex"],
            source_node=data["sourceNode"],
            destination_node=data["destinationNode"],
            executor=data["executor"],
            technology=data["technology"],
            location=data["location"],
            queue=data["queue"],
            spark_master=data["sparkMaster"],
            spark_conf=dict(data.get("sparkConf") or {}),
            parents=list(data.get("parents") or []),
            properties=dict(data.get("properties") or {}),
            serves_destinations=list(data.get("servesDestinations") or []),
            errors=list(data.get("errors") or []),
            datasets=list(data.get("datasets") or []),
            datasets_note=data.get("datasetsNote", ""),
        )


@dataclass
class CompiledFlow:
    flow_group: str
    flow_name: str
    source: str
    destinations: list[str]
    jobs: list[JobSpecPlan] = field(default_factory=list)
    pinned_versions: dict[str, int] = field(default_factory=dict)
    pending_reasons: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    topology_token: str | None = None
    topology_revision: int = 0  # TopologyRevision.number compiled against (recorded on executions)

    @property
    def job_errors(self) -> list[str]:
        return [f"{job.job_name}: {error}" for job in self.jobs for error in job.errors]

    @property
    def status(self) -> str:
        if self.errors or self.job_errors:
            return FAILED
        if self.pending_reasons:
            return PENDING
        return COMPILED

    @property
    def message(self) -> str:
        """The one-paragraph verdict stored on the flow and shown to its owner."""
        lines = [*self.errors, *self.job_errors, *self.pending_reasons]
        if lines:
            return "\n".join(lines)
        hops = "; ".join(f"{j.source_node} → {j.destination_node} on {j.executor}" for j in self.jobs)
        matched = "".join(
            f"\n{j.source_node}: source.jdbc.tables matches {len(j.datasets)} table(s) now: "
            + ", ".join(j.datasets[:50])
            + (" …" if len(j.datasets) > 50 else "")
            for j in self.jobs
            if j.datasets
        )
        return f"{len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''}: {hops}{matched}"

    @property
    def executors(self) -> list[str]:
        return sorted({job.executor for job in self.jobs})

    def plan_hash(self) -> str:
        """SHA-256 of the job plan (jobs, their executors and resolved
        properties, the pack versions): equal hashes, the same plan. Secret
        values are in it as stored (ENC(...)), never in plaintext."""
        plan = {"jobs": [job.to_dict() for job in self.jobs], "pinnedVersions": self.pinned_versions}
        return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()

    def without_matches(self) -> CompiledFlow:
        """The plan as the compiler alone makes it: what a save or preview looked up for the table
        patterns (portal.flows.tablesets) is what they matched then, shown with it but no part of the
        stored plan, which a recompile against the same topology makes again unchanged."""
        return replace(self, jobs=[replace(job, datasets=[], datasets_note="") for job in self.jobs])

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, topology_revision: int = 0) -> CompiledFlow:
        """A compile read back from its `to_dict()` (a stored DAG; the verdict follows from it)."""
        return cls(
            flow_group=data["flowGroup"],
            flow_name=data["flowName"],
            source=data["source"],
            destinations=list(data.get("destinations") or []),
            jobs=[JobSpecPlan.from_dict(job) for job in data.get("jobs") or []],
            pinned_versions=dict(data.get("pinnedVersions") or {}),
            pending_reasons=list(data.get("pendingReasons") or []),
            errors=list(data.get("errors") or []),
            topology_token=data.get("topologyToken"),
            topology_revision=topology_revision,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "flowGroup": self.flow_group,
            "flowName": self.flow_name,
            "source": self.source,
            "destinations": list(self.destinations),
            "status": self.status,
            "message": self.message,
            "executors": self.executors,
            "jobs": [job.to_dict() for job in self.jobs],
            "pinnedVersions": dict(self.pinned_versions),
            "pendingReasons": list(self.pending_reasons),
            "errors": list(self.errors),
            "topologyToken": self.topology_token,
        }
