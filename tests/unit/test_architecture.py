"""The house has one-way stairs (docs/architecture.md): an app imports only
the apps below it (or beside it, without a cycle), and an import hidden in a
function says why. Read from the source with `ast`, so an import added
anywhere, even one that only runs on a rare path, fails here."""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PORTAL = Path(__file__).resolve().parents[2] / "portal"

# From the bottom up. Apps on one layer may import each other, never in a cycle.
LAYERS: list[set[str]] = [
    # The Spark runtime (no Django) and the project's shared helpers.
    {
        "pipeline",
        "crypto",
        "api_errors",
        "api_fields",
        "api_parsers",
        "broker",
        "bulk",
        "celery",
        "redis_transport",
    },
    {"property_lines", "form_errors"},
    {"accounts", "events"},
    {"templatepacks", "topology", "keys", "quotas"},
    {"flows"},
    {"orchestration"},
    {"monitoring", "restli"},
    # The project: the URL map, settings and the handlers that answer for every app.
    {"urls", "settings", "wsgi", "errors", "middleware", "api_root", "logfilters"},
]
LAYER = {unit: number for number, units in enumerate(LAYERS) for unit in units}

# Imports up the stairs that are allowed, each with its reason: none (the crypto the pipeline
# needs to decrypt a JobSpec lives beside it, in portal.crypto).
EXCEPTIONS: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    target: str  # the dotted module imported
    in_function: bool
    reason_given: bool


def _unit(module: str) -> str | None:
    """`portal.flows.models` → `flows`; None outside the portal package."""
    parts = module.split(".")
    if parts[0] != "portal" or len(parts) < 2:
        return None
    return parts[1]


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(PORTAL.parent).with_suffix("").parts)


def _imports(path: Path, source: str | None = None) -> list[Import]:
    source = path.read_text() if source is None else source
    # Lines holding a real comment: a '#' inside a string (a docstring's "issue #19") is none.
    commented = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    tree = ast.parse(source)
    found: list[Import] = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif child.level:  # relative: resolve against this module's package
                    package = _module_of(path).split(".")[: -child.level]
                    targets = [".".join([*package, *([child.module] if child.module else [])])]
                else:
                    targets = [child.module or ""]
                # A reason is a comment on the import's line or the line above it.
                reason = any(
                    line in commented for line in range(child.lineno - 1, (child.end_lineno or 0) + 1)
                )
                ready = (
                    isinstance(function, ast.FunctionDef)
                    and function.name == "ready"
                    and path.name == "apps.py"
                )
                for target in targets:
                    found.append(
                        Import(path, child.lineno, target, function is not None and not ready, reason)
                    )
            visit(child, inner)

    visit(tree, None)
    return found


def _portal_files() -> list[Path]:
    return [path for path in sorted(PORTAL.rglob("*.py")) if "migrations" not in path.parts]


def _app_imports() -> list[tuple[str, str, Import]]:
    edges = []
    for path in _portal_files():
        source_unit = path.relative_to(PORTAL).parts[0].removesuffix(".py")
        if source_unit == "__init__":
            continue
        for found in _imports(path):
            target_unit = _unit(found.target)
            if target_unit is not None and target_unit != source_unit:
                edges.append((source_unit, target_unit, found))
    return edges


def test_every_app_and_project_module_has_a_layer():
    units = {path.relative_to(PORTAL).parts[0].removesuffix(".py") for path in _portal_files()}
    assert units - {"__init__"} <= set(LAYER), (
        f"give these a layer: {sorted(units - set(LAYER) - {'__init__'})}"
    )


def _upward(edges: list[tuple[str, str, Import]]) -> list[str]:
    return [
        f"{found.path.relative_to(PORTAL.parent)}:{found.line} ({source} imports {found.target})"
        for source, target, found in edges
        if LAYER[target] > LAYER[source] and (source, target) not in EXCEPTIONS
    ]


def test_no_app_imports_one_above_it():
    upward = _upward(_app_imports())
    assert upward == [], "imports up the stairs:\n" + "\n".join(upward)


def test_apps_on_one_layer_import_each_other_without_a_cycle():
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target, _found in _app_imports():
        graph[source].add(target)
    cycles = []
    for start in graph:
        # Depth-first from each app: coming back to it is a cycle.
        stack, seen = [(start, [start])], set()
        while stack:
            unit, trail = stack.pop()
            for nxt in graph.get(unit, ()):
                if nxt == start:
                    cycles.append(" → ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert cycles == []


def test_imports_inside_functions_say_why():
    hidden = [
        f"{found.path.relative_to(PORTAL.parent)}:{found.line} imports {found.target}"
        for path in _portal_files()
        if path.relative_to(PORTAL).parts[0] != "pipeline"  # the Spark runtime loads Spark lazily
        for found in _imports(path)
        if found.in_function and _unit(found.target) is not None and not found.reason_given
    ]
    assert hidden == [], "a function-level import needs a comment saying why:\n" + "\n".join(hidden)


def test_the_checks_see_an_upward_import_and_a_silent_hidden_one():
    probe = PORTAL / "orchestration" / "probe.py"
    source = (
        "from portal.monitoring import health\n\ndef f():\n    from portal.flows import services\n"
        '\ndef g():\n    """Not a reason: issue #19."""\n    from portal.flows import forms\n'
        "\ndef h():\n    # Loaded late: flows imports this module.\n    from portal.flows import views\n"
    )
    found = _imports(probe, source)
    assert [(item.line, item.target, item.in_function, item.reason_given) for item in found] == [
        (1, "portal.monitoring", False, False),
        (4, "portal.flows", True, False),
        (8, "portal.flows", True, False),
        (12, "portal.flows", True, True),
    ]
    assert _upward([("orchestration", "monitoring", found[0])]) != []


# Inside the orchestration app, from the bottom up (docs/architecture.md, "Orchestration's rooms").
# The app's own base (models, signals) serves every room. The dataset state is what both processes
# read and write. The control plane (the scheduler process) reaches the worker only by Celery task
# name; the worker (the Celery process) answers it through action rows (control.actions). The top
# of the app (pages, API, tasks, admin, the services facade) may use every room.
ROOMS: list[str] = ["base", "state", "control", "worker", "top"]
ROOM_BASE = {"__init__", "models", "signals"}


def _room(module: str) -> str | None:
    """`portal.orchestration.state.statestore` → `state`; None outside the orchestration app."""
    parts = module.split(".")
    if parts[:2] != ["portal", "orchestration"]:
        return None
    if len(parts) == 2 or parts[2] in ROOM_BASE:
        return "base"
    if parts[2] in ROOMS:
        return parts[2]
    return "top"


def _room_targets(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """Each import of the app's modules, anywhere in the file, as (line, dotted name): the names a
    `from portal.orchestration import views` takes count, not just the package they come from."""
    tree = ast.parse(path.read_text() if source is None else source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return sorted(found)


def _room_imports(path: Path, source: str | None = None) -> list[tuple[str, str, str]]:
    """(room, room imported, where) for each import between the app's modules in `path`."""
    source_room = _room(_module_of(path))
    edges = []
    for line, target in _room_targets(path, source):
        target_room = _room(target)
        if source_room is not None and target_room is not None:
            edges.append(
                (source_room, target_room, f"{path.relative_to(PORTAL.parent)}:{line} imports {target}")
            )
    return edges


def _upstairs(edges: list[tuple[str, str, str]]) -> list[str]:
    return [
        f"{where} ({source} → {target})"
        for source, target, where in edges
        if ROOMS.index(target) > ROOMS.index(source)
    ]


def _orchestration_files() -> list[Path]:
    return [path for path in _portal_files() if path.relative_to(PORTAL).parts[0] == "orchestration"]


def test_orchestration_has_its_three_rooms_and_no_logic_loose_beside_them():
    rooms = {path.relative_to(PORTAL / "orchestration").parts[0] for path in _orchestration_files()}
    assert {"state", "control", "worker"} <= rooms
    for room in ("state", "control", "worker"):
        assert (PORTAL / "orchestration" / room / "__init__.py").read_text().startswith('"""')


def test_no_orchestration_room_imports_one_above_it():
    edges = [edge for path in _orchestration_files() for edge in _room_imports(path)]
    assert {(source, target) for source, target, _ in edges} >= {("control", "state"), ("worker", "control")}
    upward = _upstairs(edges)
    assert upward == [], "imports up the orchestration rooms:\n" + "\n".join(upward)


def test_the_room_check_sees_an_upward_import_even_one_hidden_in_a_function():
    probe = PORTAL / "orchestration" / "state" / "probe.py"
    source = (
        "from portal.orchestration.models import JobState\n"
        "from portal.orchestration import signals\n"
        "from portal.orchestration.control import actions\n"
        "\n"
        "def f():\n"
        "    from portal.orchestration import views\n"
    )
    edges = _room_imports(probe, source)
    assert [(source, target) for source, target, _ in edges] == [
        ("state", "base"),
        ("state", "base"),
        ("state", "control"),
        ("state", "top"),
    ]
    assert _upstairs(edges) == [
        "portal/orchestration/state/probe.py:3 imports portal.orchestration.control.actions (state → control)",
        "portal/orchestration/state/probe.py:6 imports portal.orchestration.views (state → top)",
    ]


# The flows app's rooms (docs/architecture.md, "The flows app's rooms"): a concept with its own
# page, API and save path is a sub-package, not a name prefix beside the app's modules, and the
# rooms do not import each other.
FLOWS_ROOMS = ("triggers", "versions")


def test_the_flows_rooms_are_packages_that_do_not_import_each_other():
    flows = PORTAL / "flows"
    prefixed = [path.name for path in flows.glob("*.py") if path.name.startswith(("trigger", "version"))]
    assert prefixed == [], "loose beside flows' rooms: " + ", ".join(prefixed)
    for room in FLOWS_ROOMS:
        assert (flows / room / "__init__.py").read_text().startswith('"""')
        others = tuple(f"portal.flows.{other}" for other in FLOWS_ROOMS if other != room)
        crossing = [
            f"{path.relative_to(PORTAL.parent)}:{line} imports {target}"
            for path in sorted((flows / room).rglob("*.py"))
            for line, target in _room_targets(path)
            if target.startswith(others)
        ]
        assert crossing == [], f"flows.{room} imports another room:\n" + "\n".join(crossing)


# A data node kind has one room (portal/pipeline/nodekinds/: its fields, binding and login), read
# by the source and destination that serve it; the models name the kinds as choices. Anywhere else
# a kind's name written as a literal, or named as ``DataNode.Kind.JDBC``, is knowledge of that kind
# leaking out of its room. The modules
# that still do, with how many, may only shrink: ask `nodekinds.kind_for(...)` instead.
NODE_KIND_NAMES = frozenset({"jdbc", "files", "iceberg"})
KIND_ROOMS = ("pipeline/nodekinds/", "pipeline/sources/", "pipeline/destinations/", "topology/models.py")
KIND_LITERAL_BASELINE: dict[str, int] = {
    "flows/compiler/plans.py": 1,  # a first hop into a database previews its tables
    "flows/formpage.py": 1,
    "flows/forms.py": 1,
    "flows/tablesets.py": 2,
    "flows/triggers/services.py": 1,
    "orchestration/control/replays.py": 1,  # a backfill into files replaces whole loads
    "orchestration/control/triggers.py": 1,
    "orchestration/state/backfills.py": 1,
    "orchestration/state/lineage.py": 1,  # "jdbc" as a URL scheme, not a kind
    "orchestration/state/recovery.py": 1,  # "files" as a default dataset name, not a kind
    "topology/api.py": 1,
    "topology/connections.py": 5,  # who may ask a node of each kind what
    "topology/forms.py": 2,
    "topology/picker.py": 4,  # what a picker offers on each kind
    "topology/policy.py": 5,  # what a user-made node of each kind may set and reach
    "topology/reach.py": 2,  # what a node of each kind must not reach
    "topology/services.py": 3,
    "topology/tables.py": 1,  # an Iceberg table's name is in its namespace
}


def _kind_literals(path: Path, source: str | None = None) -> list[int]:
    """The lines where `path` writes a node kind's name as a string: docstrings and subscripts
    (``step["files"]``, a dict's own field) are not kind names."""
    tree = ast.parse(path.read_text() if source is None else source)
    not_names: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            not_names.add(id(body[0].value))
        if isinstance(node, ast.Subscript):
            not_names.add(id(node.slice))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Constant) and node.value in NODE_KIND_NAMES and id(node) not in not_names)
        or _kind_member(node)
    )


def _kind_member(node: ast.AST) -> bool:
    """``DataNode.Kind.JDBC`` (or ``Kind.FILES``): a kind named through the models' choices is a
    branch on that kind all the same."""
    if not (isinstance(node, ast.Attribute) and node.attr.lower() in NODE_KIND_NAMES):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "Kind") or (
        isinstance(owner, ast.Name) and owner.id == "Kind"
    )


def _kind_literal_counts() -> dict[str, int]:
    counts = {}
    for path in _portal_files():
        where = path.relative_to(PORTAL).as_posix()
        if where.startswith(KIND_ROOMS):
            continue
        lines = _kind_literals(path)
        if lines:
            counts[where] = len(lines)
    return counts


def test_node_kind_names_are_written_only_in_their_rooms():
    counts = _kind_literal_counts()
    grown = [
        f"portal/{where}: {count} (baseline {KIND_LITERAL_BASELINE.get(where, 0)})"
        for where, count in sorted(counts.items())
        if count > KIND_LITERAL_BASELINE.get(where, 0)
    ]
    assert grown == [], "node kind names outside portal/pipeline/nodekinds/:\n" + "\n".join(grown)
    shrunk = [where for where, count in sorted(KIND_LITERAL_BASELINE.items()) if counts.get(where, 0) < count]
    assert shrunk == [], "fewer kind names than the baseline says: lower it for " + ", ".join(shrunk)


def test_the_kind_check_sees_a_kind_name_but_not_a_docstring_or_a_field():
    source = (
        '"""A files node."""\n'
        "def f(node, step):\n"
        '    """Reads jdbc."""\n'
        '    step["files"].append(1)\n'
        '    return node.kind == "iceberg" or node.kind in ("jdbc", "kafka")\n'
    )
    assert _kind_literals(PORTAL / "flows" / "probe.py", source) == [5, 5]
    through_choices = "def g(node):\n    return node.kind == DataNode.Kind.JDBC or node.kind == Kind.FILES\n"
    assert _kind_literals(PORTAL / "flows" / "probe.py", through_choices) == [2, 2]
