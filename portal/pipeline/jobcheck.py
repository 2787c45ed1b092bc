"""What the pipeline would refuse in a job's properties, found before the job runs.

The portal asks this at save (a flow's compiled jobs) and in the compile preview, so a value or a
missing required key the worker would refuse is refused at once with the worker's own message: the
checks are the property schema's (`portal.pipeline.propertyrules`) and the branch-key rule
(`portal.pipeline.properties`). Node-owned keys are left out: the portal sets them from the data
nodes when it binds the job (orchestration.control.jobspecs), after this check.
"""

from __future__ import annotations

from collections.abc import Mapping

from portal.pipeline import nodekinds
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.columnrules import rule_problems
from portal.pipeline.destinations import table_templates, write_modes
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties, branch_names, check_branch_keys, is_branch_scoped
from portal.pipeline.propertyrules import (
    CDC_SOURCE_CLASS,
    FILES_SOURCE_CLASS,
    ICEBERG_NAME,
    JDBC_SOURCE_CLASS,
    SOURCE_CDC,
    SOURCE_FILES,
    SOURCE_JDBC,
    USER,
    WRITER_FILES,
    WRITER_ICEBERG,
    WRITER_JDBC,
    PropertySpec,
    base_key,
    missing_message,
    required_specs,
    value_problems,
)


def source_kind(props: Properties) -> str | None:
    """``source:files`` / ``source:jdbc`` for the built-in sources (by class, else by the source
    node's kind, as the binding picks it); None for a custom source."""
    by_class = {
        FILES_SOURCE_CLASS: SOURCE_FILES,
        JDBC_SOURCE_CLASS: SOURCE_JDBC,
        CDC_SOURCE_CLASS: SOURCE_CDC,
    }
    cls = props.get("source.class")
    if cls:
        return by_class.get(cls)
    kind = nodekinds.kind_for(props.get("flowport.hop.source.kind") or "")
    return by_class.get(kind.source_class) if kind else None


def writer_kind(branch: Properties) -> str | None:
    if branch.get("writer.builder.class"):
        return None
    fmt = branch.get("writer.output.format")
    if not fmt:  # the format the binding gives the destination node's kind
        kind = nodekinds.kind_for(branch.get("flowport.hop.destination.kind") or "")
        fmt = kind.writer_format if kind else ""
    return {"JDBC": WRITER_JDBC, "ICEBERG": WRITER_ICEBERG}.get(fmt.upper(), WRITER_FILES)


def _waived(props: Properties, spec: PropertySpec) -> bool:
    if not spec.unless:
        return False
    key, _, value = spec.unless.partition("=")
    return (props.get(key) or "").lower() == value.lower()


def _missing(props: Properties, kind: str | None) -> list[str]:
    if kind is None:
        return []
    return [
        missing_message(props.describe(spec.key), spec)
        for spec in required_specs(kind)
        if spec.owner == USER and props.get(spec.key) is None and not _waived(props, spec)
    ]


def job_property_problems(values: Mapping[str, str], *, first_hop: bool = True) -> list[str]:
    """Every refusal the schema can tell from the properties alone (values, required keys per
    source and per branch's writer, branch suffixes). A later hop replicates its parent's output,
    so its source keys are the parent's (the binding sets them) and only its writer is checked."""
    if not first_hop:
        # The binding drops a forked parent's branch keys from a later hop (it copies branch 0).
        values = {k: v for k, v in values.items() if not (is_branch_scoped(k) and base_key(k) != k)}
    props = Properties({k: v for k, v in values.items() if isinstance(v, str)})
    problems = value_problems(values)
    if problems:
        return problems
    try:
        branches = max(1, props.get_int("fork.branches", 1) or 1) if first_hop else 1
        check_branch_keys(props.raw, branches)
    except ConfigError as error:
        return [str(error)]
    if first_hop:
        problems += _missing(props, source_kind(props))
        if source_kind(props) == SOURCE_CDC:
            problems += cdc_pg.table_problems(
                props.get_list("source.cdc.tables"), props.describe("source.cdc.tables")
            )
        problems += rule_problems(props.raw)
    names = branch_names(props, branches)
    for index in range(branches):
        branch = props.for_branch(index, branches, names[index])
        kind = writer_kind(branch)
        problems += _missing(branch, kind)
        if kind == WRITER_JDBC:
            named = branch.describe("writer.jdbc.table")
            problems += table_templates.template_problems(branch.get("writer.jdbc.table"), named)
        if kind == WRITER_ICEBERG:
            problems += _iceberg_problems(branch)
        if kind is not None:
            fmt = {WRITER_JDBC: "JDBC", WRITER_ICEBERG: "ICEBERG"}.get(kind) or branch.get(
                "writer.output.format"
            )
            problems += write_modes.problems(branch, fmt or "PARQUET")
    return problems


def _iceberg_problems(branch: Properties) -> list[str]:
    """What the Iceberg writer would refuse before reading (portal.pipeline.destinations.iceberg.table_spec)."""
    problems = table_templates.template_problems(
        branch.get("writer.iceberg.table"), branch.describe("writer.iceberg.table")
    )
    if not problems:  # ``{table}`` stands for a plain name, checked per dataset by the worker
        problems = [
            f"{branch.describe(key)} must be a plain name (letters, digits, '_', '-'), got '{value}'"
            for key in ("writer.iceberg.namespace", "writer.iceberg.table")
            if (value := branch.get(key))
            and "${" not in value
            and not ICEBERG_NAME.match(table_templates.fill(value, "t"))
        ]
    return problems
