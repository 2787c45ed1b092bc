"""The flow form's source picker: choose a table (or a folder of files) the
source node holds, its columns and its watermark column from discovery,
instead of typing property names. The picks are posted with the flow form
as `pick_*` fields and become ordinary job properties at save:

* JDBC: `source.jdbc.tables` (the table), `extract.delta.fields` (the
  watermark column: the catalog's candidates offered first; none chosen is
  `extract.is.full=true`, the whole table each run),
  `extract.primary.key.fields` (the key columns, the catalog's primary key
  ticked);
* files: `source.files.datasets` (the folder), `source.files.format` (from
  the files' suffix), `extract.primary.key.fields` (columns ticked as the
  key) — a files source's watermark is the files' modification time, not a
  column;
* both: the column rules (`portal.pipeline.columns`): `columns.drop` (the
  columns left unticked), `columns.hash` and `columns.encrypt` (the columns
  whose rule says so: a salted SHA-256, or encrypted under the flow owner's
  customer key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from portal.topology import connections, grants
from portal.topology.models import DataNode

RULES = {"hash": "columns.hash", "encrypt": "columns.encrypt"}  # a kept column's rule -> its key
FORMAT_OF_SUFFIX = {"csv": "csv", "json": "json", "jsonl": "json", "parquet": "parquet"}


@dataclass
class Pickable:
    """A table, or a folder of data files (one dataset of a files source)."""

    name: str
    columns: list[connections.Column]
    format: str = ""
    primary_key: list[str] = field(default_factory=list)

    @property
    def watermark_candidates(self) -> list[connections.Column]:
        return [column for column in self.columns if column.watermark_candidate]

    @property
    def other_watermark_columns(self) -> list[connections.Column]:
        """Of an ordered type but not likely to grow with new rows: offered after the candidates."""
        return [c for c in self.columns if c.watermark_suitable and not c.watermark_candidate]

    @property
    def watermark_columns(self) -> list[connections.Column]:
        return self.watermark_candidates + self.other_watermark_columns


@dataclass
class Choices:
    node: DataNode | None
    message: str = ""
    pickables: list[Pickable] | None = None

    def find(self, name: str) -> Pickable | None:
        return next((p for p in self.pickables or [] if p.name == name), None)


@dataclass
class Picks:
    """What the picker shows as chosen for one table or folder: the user's own picks when the form
    comes back (a refused save, another table looked at and back), else the catalog's suggestions."""

    columns: set[str]
    rules: dict[str, str]
    primary_key: set[str]
    watermark: str
    rows: list[PickedColumn] = field(default_factory=list)


@dataclass(frozen=True)
class PickedColumn:
    """One column as the picker shows it."""

    column: connections.Column
    kept: bool
    rule: str
    in_key: bool


def _with_rows(picks: Picks, chosen: Pickable) -> Picks:
    picks.rows = [
        PickedColumn(c, c.name in picks.columns, picks.rules.get(c.name, ""), c.name in picks.primary_key)
        for c in chosen.columns
    ]
    return picks


def _getlist(data: Mapping, key: str) -> list[str]:
    getlist = getattr(data, "getlist", lambda name: data.get(name) or [])
    return [str(value) for value in getlist(key) if value]


def picks_for(data: Mapping, chosen: Pickable) -> Picks:
    """The picks posted for ``chosen`` (the picker posts ``pick_for``: the dataset its columns were
    shown for), else the suggestions: every column kept, the table's primary key, no watermark."""
    if (data.get("pick_for") or "") != chosen.name:
        return _with_rows(Picks({c.name for c in chosen.columns}, {}, set(chosen.primary_key), ""), chosen)
    rules = {c.name: str(data.get(f"pick_rule-{c.name}") or "") for c in chosen.columns}
    picks = Picks(
        set(_getlist(data, "pick_columns")),
        {name: rule for name, rule in rules.items() if rule in RULES},
        set(_getlist(data, "pick_primary_key")),
        str(data.get("pick_watermark") or ""),
    )
    return _with_rows(picks, chosen)


def shown(user, data: Mapping) -> dict[str, object]:
    """The picker's template context for the posted flow form: the source's tables or folders, the
    one chosen and its picks."""
    found = choices(user, str(data.get("source") or ""), connect_as=connection_user(data))
    chosen = found.find(str(data.get("pick_dataset") or ""))
    return {"found": found, "chosen": chosen, "picks": picks_for(data, chosen) if chosen else None}


def connection_user(data: Mapping) -> str:
    """The flow's `source.conn.username`, when typed in a property row: the
    JDBC user the flow will read as, so discovery sees what the flow will."""
    for key, value in data.items():
        if key.startswith("prop-") and key.endswith("-key") and str(value).strip() == "source.conn.username":
            return str(data.get(key[: -len("key")] + "value", "")).strip()
    return ""


def choices(user, node_name: str, *, connect_as: str = "") -> Choices:
    """What the user may pick from the node (nothing from a node not granted to them)."""
    node = DataNode.objects.filter(name=node_name).first() if node_name else None
    if node is None:
        return Choices(None, "Choose a source first.")
    if not grants.may_use(user, node.name, grants.READ):
        return Choices(None, f"You hold no read grant on data node {node.name}.")
    found = connections.discover(node, user=connect_as)
    if not found.ok:
        return Choices(node, found.message)
    if node.kind == DataNode.Kind.JDBC:
        tables = [Pickable(d.name, d.columns, primary_key=d.primary_key) for d in found.datasets]
        return Choices(node, found.message, tables)
    folders: dict[str, Pickable] = {}
    for dataset in found.datasets:
        folder, _, rest = dataset.name.partition("/")
        if rest and folder not in folders:  # one dataset per folder under the root; its first file's columns
            suffix = dataset.name.rsplit(".", 1)[-1].lower()
            folders[folder] = Pickable(folder, dataset.columns, FORMAT_OF_SUFFIX.get(suffix, ""))
    return Choices(node, f"{len(folders)} folder(s) with data files.", list(folders.values()))


def picked_properties(data: Mapping, source_kind: str) -> dict[str, str]:
    """The job properties the posted picks stand for (empty when nothing was picked)."""
    dataset = (data.get("pick_dataset") or "").strip()
    if not dataset:
        return {}
    ticked = _getlist(data, "pick_columns")
    known = _getlist(data, "pick_known_columns")
    dropped = [name for name in known if name not in ticked]
    properties: dict[str, str] = {}
    keys = _getlist(data, "pick_primary_key")
    if keys:
        properties["extract.primary.key.fields"] = ",".join(keys)
    if source_kind == DataNode.Kind.JDBC:
        properties["source.jdbc.tables"] = dataset
        watermark = (data.get("pick_watermark") or "").strip()
        if watermark:
            properties["extract.delta.fields"] = watermark
        else:  # "none: read the whole table each run", as the select says
            properties["extract.is.full"] = "true"
    else:
        properties["source.files.datasets"] = dataset
        file_format = (data.get("pick_format") or "").strip()
        if file_format:
            properties["source.files.format"] = file_format
    if dropped and ticked:
        properties["columns.drop"] = ",".join(dropped)
    for rule, key in RULES.items():
        ruled = [name for name in ticked if (data.get(f"pick_rule-{name}") or "").strip() == rule]
        if ruled:
            properties[key] = ",".join(ruled)
    return properties


def source_kind(node_name: str) -> str:
    return DataNode.objects.filter(name=node_name).values_list("kind", flat=True).first() or ""
