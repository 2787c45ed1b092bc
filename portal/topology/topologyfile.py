"""The topology file (GaaS's immutable TopologyCatalog, loaded at start-up).

YAML (`.yaml`/`.yml`) or HOCON (`.conf`/`.hocon`/`.json`):

    dataNodes:
      - {name: landing, kind: files, properties: {path: var/data/landing}}
    executors:
      - name: spark-local-ingest
        technology: spark-local
        queue: executor.spark-local-ingest
        sparkMaster: "local[*]"
        capabilities: ["landing -> lake"]   # or [landing, lake] or {source:, destination:}
        userSources: jdbc, files            # user-made nodes it reads from (routing policy)
        userDestinations: [files, jdbc, iceberg]   # and writes to

Syncing is idempotent: entries are created or updated to match the file;
executors an earlier sync loaded from the same file and now missing are
removed; entries created at run time by admins are left alone. The whole
file is validated first; any problem aborts with `file:line: reason` lines
and nothing is saved.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from pyhocon import ConfigFactory
from pyparsing import ParseBaseException

from portal.templatepacks.hocon import PARSE_LOCK
from portal.topology import services
from portal.topology.models import DataNode, SpecExecutor
from portal.topology.validators import user_kinds

NODE_KEYS = {"name": "name", "kind": "kind", "description": "description", "properties": "properties"}
EXECUTOR_KEYS = {
    "name": "name",
    "uri": "uri",
    "technology": "technology",
    "location": "location",
    "queue": "queue",
    "sparkMaster": "spark_master",
    "sparkConf": "spark_conf",
    "description": "description",
    "enabled": "enabled",
    "cost": "cost",
    "userSources": "user_sources",
    "userDestinations": "user_destinations",
}


class TopologyFileError(Exception):
    def __init__(self, path: Path, problems: list[tuple[int | None, str]]) -> None:
        self.path, self.problems = path, problems
        super().__init__("\n".join(f"{path}:{line or '?'}: {reason}" for line, reason in problems))


class _LineDict(dict):
    line: int = 0


class _LineList(list):
    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping and list item."""

    def construct_mapping(self, node, deep=False):
        mapping = _LineDict(super().construct_mapping(node, deep=True))
        mapping.line = node.start_mark.line + 1
        return mapping

    def construct_sequence(self, node, deep=False):
        items = _LineList(super().construct_sequence(node, deep=True))
        items.lines = [child.start_mark.line + 1 for child in node.value]
        return items


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _LineLoader.construct_sequence)


def _parse(path: Path) -> tuple[dict, str]:
    try:
        text = path.read_text()
    except OSError as error:
        raise TopologyFileError(path, [(None, f"cannot read the file: {error.strerror or error}")]) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.MarkedYAMLError as error:
            line = error.problem_mark.line + 1 if error.problem_mark else None
            raise TopologyFileError(path, [(line, f"not valid YAML: {error.problem}")]) from None
    else:
        try:
            with PARSE_LOCK:
                data = ConfigFactory.parse_string(text).as_plain_ordered_dict()
        except ParseBaseException as error:
            raise TopologyFileError(path, [(error.lineno, f"not valid HOCON: {error.msg}")]) from None
        except Exception as error:  # pyhocon raises plain exceptions for bad substitutions
            raise TopologyFileError(path, [(None, f"not valid HOCON: {error}")]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise TopologyFileError(path, [(1, "the top level must be a map with dataNodes and executors")])
    return data, text


def _line_of(entry: Any, text: str, *needles: str) -> int | None:
    """YAML knows its lines; for HOCON, the first line that mentions the entry."""
    if getattr(entry, "line", 0):
        return entry.line
    for needle in needles:
        pattern = re.compile(rf"(^|[^A-Za-z0-9_.-]){re.escape(needle)}($|[^A-Za-z0-9_.-])")
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                return number
    return None


def _messages(error: ValidationError, keys: dict[str, str]) -> list[str]:
    api = {model: name for name, model in keys.items()}
    if hasattr(error, "error_dict"):
        return [f"{api.get(f, f)}: {m}" for f, ms in error.message_dict.items() for m in ms]
    return list(error.messages)


def _capability(item: Any) -> tuple[str, str] | None:
    if isinstance(item, str) and "->" in item:
        source, _, destination = item.partition("->")
        return source.strip(), destination.strip()
    if isinstance(item, list) and len(item) == 2 and all(isinstance(i, str) for i in item):
        return item[0], item[1]
    if isinstance(item, dict) and set(item) == {"source", "destination"}:
        return str(item["source"]), str(item["destination"])
    return None


def _entries(data: dict, key: str, problems: list, text: str) -> list:
    entries = data.get(key, [])
    if not isinstance(entries, list):
        problems.append((_line_of(data, text, key), f"{key} must be a list"))
        return []
    return entries


def parse_topology_file(path: Path) -> tuple[list[dict], list[tuple[dict, list[tuple[str, str]]]]]:  # noqa: C901
    """Validated (data node fields, [(executor fields, capabilities)]) or TopologyFileError."""
    data, text = _parse(path)
    problems: list[tuple[int | None, str]] = []
    unknown_top = sorted(set(data) - {"dataNodes", "executors"})
    if unknown_top:
        problems.append((_line_of(data, text, unknown_top[0]), f"unknown key(s) {', '.join(unknown_top)}"))
    nodes, executors = [], []
    names: dict[str, set[str]] = {"node": set(), "executor": set()}
    for kind, key, keys, model in (
        ("node", "dataNodes", NODE_KEYS, DataNode),
        ("executor", "executors", EXECUTOR_KEYS, SpecExecutor),
    ):
        for entry in _entries(data, key, problems, text):
            if not isinstance(entry, dict):
                problems.append((_line_of(entry, text, str(entry)), f"each of {key} must be a map"))
                continue
            name = str(entry.get("name", ""))
            line = _line_of(entry, text, name) if name else getattr(entry, "line", None)
            unknown = sorted(set(entry) - set(keys) - ({"capabilities"} if kind == "executor" else set()))
            if unknown:
                problems.append((line, f"{key} {name!r}: unknown key(s) {', '.join(unknown)}"))
            fields = {keys[k]: (dict(v) if isinstance(v, dict) else v) for k, v in entry.items() if k in keys}
            for field in ("user_sources", "user_destinations"):  # a list or "jdbc, files": one spelling
                if field in fields:
                    value = fields[field]
                    items = [str(item) for item in value] if isinstance(value, list) else [str(value or "")]
                    fields[field] = ",".join(dict.fromkeys(user_kinds(",".join(items))))
            if name in names[kind]:
                problems.append((line, f"{key} {name!r}: the name is used twice"))
            names[kind].add(name)
            try:
                model(**fields).full_clean(validate_unique=False)
            except ValidationError as error:
                problems.extend((line, f"{key} {name!r}: {message}") for message in _messages(error, keys))
            except (TypeError, ValueError) as error:
                problems.append((line, f"{key} {name!r}: {error}"))
            if kind == "node":
                nodes.append(fields)
                continue
            raw = entry.get("capabilities", [])
            raw_lines = getattr(raw, "lines", [])
            pairs = []
            for index, item in enumerate(raw if isinstance(raw, list) else [raw]):
                pair = _capability(item)
                item_line = raw_lines[index] if index < len(raw_lines) else _line_of(None, text, str(item))
                if pair is None:
                    problems.append(
                        (item_line, f"executor {name!r}: capability {item!r} is not 'source -> destination'")
                    )
                else:
                    pairs.append((pair, item_line))
            executors.append((fields, pairs))
    known = names["node"] | set(DataNode.objects.values_list("name", flat=True))
    for fields, pairs in executors:
        for (source, destination), line in pairs:
            for role, node in (("source", source), ("destination", destination)):
                if node not in known:
                    problems.append(
                        (
                            line,
                            f"executor {fields.get('name')!r}: capability {source} -> {destination}: unknown {role} data node {node!r}",
                        )
                    )
    if problems:
        raise TopologyFileError(path, problems)
    return nodes, [(fields, [pair for pair, _ in pairs]) for fields, pairs in executors]


def _differs(instance: Any, fields: dict) -> bool:
    return any(getattr(instance, field) != value for field, value in fields.items())


def sync_topology_file(path: Path) -> dict[str, int]:
    nodes, executors = parse_topology_file(path)
    origin = str(path)
    summary = {"created": 0, "updated": 0, "unchanged": 0, "removed": 0}
    try:
        with transaction.atomic(), services.batched_changes():
            existing_nodes = DataNode.objects.in_bulk([n["name"] for n in nodes], field_name="name")
            for fields in nodes:
                node = existing_nodes.get(fields["name"])
                if node is None:
                    services.create_data_node(fields, origin=origin)
                    summary["created"] += 1
                elif _differs(node, fields):
                    services.update_data_node(node, fields)
                    summary["updated"] += 1
                else:
                    summary["unchanged"] += 1
            existing = SpecExecutor.objects.in_bulk([e["name"] for e, _ in executors], field_name="name")
            for fields, pairs in executors:
                executor = existing.get(fields["name"])
                if executor is None:
                    services.create_executor(fields, capabilities=pairs, origin=origin)
                    summary["created"] += 1
                    continue
                current = set(executor.capabilities.values_list("source__name", "destination__name"))
                if _differs(executor, fields) or current != set(pairs):
                    services.update_executor(executor, fields, capabilities=pairs)
                    summary["updated"] += 1
                else:
                    summary["unchanged"] += 1
            names = {fields["name"] for fields, _ in executors}
            for executor in SpecExecutor.objects.filter(origin=origin).exclude(name__in=names):
                services.delete_executor(executor)
                summary["removed"] += 1
    except ValidationError as error:
        raise TopologyFileError(
            path, [(None, message) for message in _messages(error, EXECUTOR_KEYS)]
        ) from None
    return summary
