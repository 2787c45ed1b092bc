"""docs/properties.md, generated from the property schema (portal.pipeline.propertyrules), so the
reference never drifts from what the pipeline reads and the portal checks.

    .venv/bin/python -m portal.pipeline.propertydoc docs/properties.md

tests/unit/pipeline/test_schema.py fails when the committed page is not what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from portal.pipeline.propertyrules import NODE, SPECS, PropertySpec

GROUPS = (
    (
        "Job",
        ("job.", "flow.", "flowport.", "mr.", "numbers.", "dataset.", "spark.", "source.class", "schema."),
    ),
    ("Files source", ("source.files.", "source.schema", "errors.")),
    ("Column rules", ("columns.",)),
    ("JDBC source", ("source.jdbc.", "source.conn.", "extract.")),
    ("Change data capture", ("source.cdc.",)),
    ("Converters (per branch)", ("converter.",)),
    ("Quality checks (per branch)", ("qualitychecker.",)),
    ("Fork", ("fork.",)),
    ("Writer and publisher (per branch)", ("writer.", "data.publisher.")),
)
KINDS = {
    "source:files": "files source",
    "source:jdbc": "JDBC source",
    "source:cdc": "CDC source",
    "writer:files": "files destination",
    "writer:jdbc": "JDBC destination",
    "writer:iceberg": "Iceberg destination",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(spec: PropertySpec) -> str:
    kind = spec.type + (f": {', '.join(spec.choices)}" if spec.choices else "")
    required = ", ".join(KINDS[k] for k in spec.required_for)
    if required and spec.unless:
        required += f" (unless {spec.unless})"
    who = "portal (from the data nodes)" if spec.owner == NODE else "flow, template"
    default = f"`{spec.default}`" if spec.default is not None else ""
    cells = [f"`{spec.key}`", kind, default, required, who, spec.description]
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _group(spec: PropertySpec) -> str:
    return next(name for name, prefixes in GROUPS if spec.key.startswith(prefixes))


def render() -> str:
    lines = [
        "# Job properties",
        "",
        "<!-- Generated from portal/pipeline/propertyrules.py by "
        "`python -m portal.pipeline.propertydoc docs/properties.md`; do not edit. -->",
        "",
        "Every key the pipeline reads, as its property schema declares it. The same schema checks a",
        "flow when it is saved (API, form, Rest.li) and in the compile preview, so a value the",
        "worker would refuse is refused at save with the worker's own message.",
        "",
        "- **Type**: `int`, `number` and `bool` (`true`/`false`, `yes`/`no`, `1`/`0`, `on`/`off`) are",
        "  parsed; a `choice` takes one of the listed values (any case); `list` is comma-separated;",
        "  `mapping` is `name:value` pairs; `class`/`classes` name built-in or allowed classes",
        "  ([security](security.md)).",
        "- **Required for**: the jobs that cannot run without it, by source kind and by each fork",
        "  branch's destination kind.",
        "- **Per branch**: with `fork.branches` > 1, the converter, quality, writer and publisher keys",
        "  are given per branch as `<key>.<N>` ([pipeline](pipeline.md)).",
        "- **Set by**: keys the portal sets from the data nodes are refused in flows and templates.",
        "",
    ]
    for name, _prefixes in GROUPS:
        lines += [f"## {name}", "", "| key | type | default | required for | set by | meaning |"]
        lines += ["| --- | --- | --- | --- | --- | --- |"]
        lines += [_row(spec) for spec in SPECS if _group(spec) == name]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if target is None:
        sys.stdout.write(render())
    else:
        target.write_text(render())
