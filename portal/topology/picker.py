"""The flow form's source picker: choose a table (or a folder of files) the
source node holds, its columns and its watermark column from discovery,
instead of typing property names. The picks are posted with the flow form
as `pick_*` fields and become ordinary job properties at save:

* JDBC: `source.jdbc.tables` (the table), `extract.delta.fields` (the
  watermark column: the catalog's candidates, the best one chosen by default;
  none chosen is `extract.is.full=true`, the whole table each run);
* files: `source.files.datasets` (a folder under the root) or
  `source.files.folder` (an upstream flow's own output, `<flowGroup>/<flowName>`:
  the downstream flow reads that flow's output only), `source.files.format`
  (from the files' suffix) — a files source's watermark is the files'
  modification time, not a column;
* both: the key columns, ticked from the catalog's primary key: the flow
  form's "Primary key" box (`extract.primary.key.fields`) is the one key, the
  ticks its view (`key_for`); the column rules (`portal.pipeline.columns`):
  `columns.drop` (the columns left unticked), `columns.hash` and
  `columns.encrypt` (the columns whose rule says so: a salted SHA-256, or
  encrypted under the flow owner's customer key).

Edit shows a saved flow's picks again (`restored`) when they say exactly what
its properties say."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from portal.pipeline.destinations.write_modes import PRIMARY_KEY
from portal.topology import connections, grants, signals
from portal.topology.models import DataNode

RULES = {"hash": "columns.hash", "encrypt": "columns.encrypt"}  # a kept column's rule -> its key
BOX = "primary_key"  # the flow form's "Primary key" field: the key the picker's ticks stand for
FOLDER = "source.files.folder"  # a folder below the node's root read instead of the root
FORMAT_OF_SUFFIX = {"csv": "csv", "json": "json", "jsonl": "json", "parquet": "parquet"}


@dataclass
class Pickable:
    """A table, or a folder of data files (one dataset of a files source); `upstream` names the
    flow whose own output folder (``<flowGroup>/<flowName>`` under the node) it is."""

    name: str
    columns: list[connections.Column]
    format: str = ""
    primary_key: list[str] = field(default_factory=list)
    upstream: str = ""

    @property
    def watermark_candidates(self) -> list[connections.Column]:
        return [column for column in self.columns if column.watermark_candidate]

    @property
    def best_watermark(self) -> str:
        """The candidate an incremental flow should follow, offered as the default: a timestamp
        that moves on every change (`updated_at`, `modified`, `changed`, `last_…`) before any
        other timestamp, then a column the database numbers, then a date; "" when none."""
        ranked = sorted(self.watermark_candidates, key=_watermark_rank)
        return ranked[0].name if ranked else ""


_CHANGE_WORDS = ("updat", "modif", "chang", "last", "edit")
_RANK_OF_REASON = {"timestamp": 1, "identity column": 2, "integer primary key": 3, "date": 4}


def _watermark_rank(column: connections.Column) -> int:
    if column.candidate == "timestamp" and any(word in column.name.lower() for word in _CHANGE_WORDS):
        return 0
    return _RANK_OF_REASON.get(column.candidate, 5)


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


def _names(text: object) -> list[str]:
    return [name.strip() for name in str(text or "").split(",") if name.strip()]


def key_for(data: Mapping, chosen: Pickable) -> set[str]:
    """The key columns the picker ticks. The flow form's "Primary key" box is the one key
    (`extract.primary.key.fields`): ticks follow it whenever it names columns of ``chosen``;
    otherwise the ticks posted for ``chosen``, else the catalog's primary key. The page's script
    writes every tick into the box, so the two never disagree."""
    typed = _names(data.get(BOX))
    if typed and set(typed) <= {column.name for column in chosen.columns}:
        return set(typed)
    if (data.get("pick_for") or "") == chosen.name:
        return set(_getlist(data, "pick_primary_key"))
    return set(chosen.primary_key)


def picks_for(data: Mapping, chosen: Pickable) -> Picks:
    """The picks posted for ``chosen`` (the picker posts ``pick_for``: the dataset its columns were
    shown for), else the suggestions: every column kept, the table's primary key, the best
    watermark candidate."""
    if (data.get("pick_for") or "") != chosen.name:
        columns = {c.name for c in chosen.columns}
        return _with_rows(Picks(columns, {}, key_for(data, chosen), chosen.best_watermark), chosen)
    rules = {c.name: str(data.get(f"pick_rule-{c.name}") or "") for c in chosen.columns}
    picks = Picks(
        set(_getlist(data, "pick_columns")),
        {name: rule for name, rule in rules.items() if rule in RULES},
        key_for(data, chosen),
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
            folders[folder] = Pickable(folder, dataset.columns, _format_of(dataset.name))
    outputs = upstream_outputs(user, node)
    message = f"{len(folders)} folder(s) with data files"
    if outputs:
        message += f"; the output of {len(outputs)} upstream flow(s) you may see"
    return Choices(node, message + ".", outputs + list(folders.values()))


def _format_of(name: str) -> str:
    return FORMAT_OF_SUFFIX.get(name.rsplit(".", 1)[-1].lower(), "")


def upstream_outputs(user, node: DataNode) -> list[Pickable]:
    """The own output folders (``<flowGroup>/<flowName>``) of the flows `user` may VIEW that
    publish into files node `node` and have published data files: chosen, the downstream flow
    reads that folder only (`source.files.folder`), not the group's other flows."""
    named: list[tuple[str, str]] = []
    for _receiver, answer in signals.upstream_flows.send(sender=DataNode, user=user, node_name=node.name):
        named.extend(pair for pair in cast(list[tuple[str, str]], answer) if pair not in named)
    outputs = []
    for group, flow in named:
        folder = f"{group}/{flow}"
        found = connections.discover_folder(node, folder)
        first = next((d for d in found.datasets if "/" in d.name and d.columns), None)
        if found.ok and first is not None:
            outputs.append(Pickable(folder, first.columns, _format_of(first.name), upstream=folder))
    return outputs


def picked_properties(data: Mapping, source_kind: str) -> dict[str, str]:
    """The job properties the posted picks stand for (empty when nothing was picked). The key
    ticks stand for `extract.primary.key.fields` only when the form's "Primary key" box is blank
    (the box, filled, is the key, put by the form)."""
    dataset = (data.get("pick_dataset") or "").strip()
    if not dataset:
        return {}
    ticked = _getlist(data, "pick_columns")
    known = _getlist(data, "pick_known_columns")
    dropped = [name for name in known if name not in ticked]
    properties: dict[str, str] = {}
    keys = _getlist(data, "pick_primary_key")
    if keys and not _names(data.get(BOX)):
        properties[PRIMARY_KEY] = ",".join(keys)
    if source_kind == DataNode.Kind.JDBC:
        properties["source.jdbc.tables"] = dataset
        watermark = (data.get("pick_watermark") or "").strip()
        if watermark:
            properties["extract.delta.fields"] = watermark
        else:  # "none: read the whole table each run", as the select says
            properties["extract.is.full"] = "true"
    else:  # a folder under the root, or an upstream flow's own output folder (a path below it)
        properties[FOLDER if "/" in dataset else "source.files.datasets"] = dataset
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


# Every key a pick stands for: on Edit, shown by the picker instead of as property rows.
PICKED_KEYS = frozenset(
    {
        "source.jdbc.tables",
        "extract.delta.fields",
        "extract.is.full",
        "source.files.datasets",
        FOLDER,
        "source.files.format",
        "columns.drop",
        *RULES.values(),
    }
)


def restored(user, node_name: str, properties: Mapping[str, str]) -> dict[str, object] | None:
    """The picker as a saved flow's properties say it was left (its table or folder, kept
    columns, rules, watermark and key: `shown`'s context), so Edit shows the picker, not raw
    properties; None when the picks cannot say exactly what the properties say (a table pattern,
    a column gone, a key the picker does not set): Edit then shows them as property rows."""
    kind = source_kind(node_name)
    dataset = properties.get("source.jdbc.tables" if kind == DataNode.Kind.JDBC else FOLDER, "")
    if kind != DataNode.Kind.JDBC and not dataset:
        dataset = properties.get("source.files.datasets", "")
    if not dataset or "," in dataset:
        return None
    found = choices(user, node_name, connect_as=properties.get("source.conn.username", ""))
    chosen = found.find(dataset)
    if chosen is None:
        return None
    names = [column.name for column in chosen.columns]
    dropped = set(_names(properties.get("columns.drop")))
    data: dict[str, object] = {
        "source": node_name,
        "pick_dataset": dataset,
        "pick_for": dataset,
        "pick_known_columns": names,
        "pick_columns": [name for name in names if name not in dropped],
        "pick_watermark": properties.get("extract.delta.fields", ""),
        "pick_primary_key": _names(properties.get(PRIMARY_KEY)),
        BOX: properties.get(PRIMARY_KEY, ""),
        "pick_format": properties.get("source.files.format", ""),
    }
    for rule, key in RULES.items():
        data.update({f"pick_rule-{name}": rule for name in _names(properties.get(key))})
    saved = {key: value for key, value in properties.items() if key in PICKED_KEYS}
    if picked_properties(data, kind) != saved:
        return None
    return {"found": found, "chosen": chosen, "picks": picks_for(data, chosen)}


def source_kind(node_name: str) -> str:
    return DataNode.objects.filter(name=node_name).values_list("kind", flat=True).first() or ""
