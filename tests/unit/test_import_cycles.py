"""The pipeline's and orchestration's modules import one another one way: no cycle, not even
through an import hidden in a function or at the bottom of a module (the writers, commit steps and
Iceberg destination once held one up that way). Nor between rooms: a sub-package (``cdc/``,
``destinations/``, ``control/``, ...) counts as one room and a loose module as a room of its own,
and no room reaches itself again through another (``destinations/publisher.py`` imported
``backfills.py``, which imported ``destinations/write_modes.py``: no module cycle, but a room loop).
Read from the source with `ast`, so an import on a rare path counts too."""

from __future__ import annotations

import ast
from pathlib import Path

PORTAL = Path(__file__).resolve().parents[2] / "portal"
APPS = ("pipeline", "orchestration")


def _module_of(path: Path) -> str:
    parts = path.relative_to(PORTAL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the pipeline modules it imports; ``sources`` maps a module to (its text, package?).
    ``from portal.pipeline.x import y`` names the module ``x.y`` when there is one, else ``x``."""
    graph: dict[str, set[str]] = {}
    for module, (text, is_package) in sources.items():
        package = module if is_package else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base)
        graph[module] = {name for name in found if name in sources and name != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _rooms(graph: dict[str, set[str]], app: str) -> dict[str, set[str]]:
    """The module graph of ``app`` (``portal.pipeline``) with each sub-package folded into one room:
    ``portal.pipeline.cdc.pg`` -> ``portal.pipeline.cdc``; a loose module stays itself."""

    def room(module: str) -> str:
        return ".".join(module.split(".")[: len(app.split(".")) + 1])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    return folded


def _sources(app: str) -> dict[str, tuple[str, bool]]:
    return {
        _module_of(p): (p.read_text(), p.name == "__init__.py")
        for p in (PORTAL / app).rglob("*.py")
        if "migrations" not in p.parts
    }


def test_the_pipeline_has_no_import_cycle():
    sources = _sources("pipeline")
    graph = _graph(sources)
    assert "portal.pipeline.destinations.commit_steps" in graph  # the walk found the packages
    assert "portal.pipeline.sources.jdbc" in graph
    assert "portal.pipeline.cdc.pg" in graph
    assert _cycles(graph) == []


def test_no_room_of_the_pipeline_or_orchestration_reaches_itself_again():
    for app in APPS:
        graph = _graph(_sources(app))
        rooms = _rooms(graph, f"portal.{app}")
        assert _cycles(graph) == [], f"portal.{app}: modules in a cycle"
        assert _cycles(rooms) == [], f"portal.{app}: rooms in a loop"
    pipeline = _rooms(_graph(_sources("pipeline")), "portal.pipeline")
    assert "portal.pipeline.cdc" in pipeline["portal.pipeline.sources"]  # the rooms were found
    assert "portal.pipeline.backfills" in pipeline["portal.pipeline.destinations"]
    orchestration = _rooms(_graph(_sources("orchestration")), "portal.orchestration")
    assert "portal.orchestration.state" in orchestration["portal.orchestration.control"]


def test_the_registry_sees_every_destination_kind_without_importing_it_back():
    graph = _graph(_sources("pipeline"))
    kinds = {f"portal.pipeline.destinations.{kind}" for kind in ("files", "files_replace", "jdbc", "iceberg")}
    assert kinds <= graph["portal.pipeline.destinations.commit_steps"]
    for kind in kinds:
        assert "portal.pipeline.destinations.commit_steps" not in graph[kind]


def test_the_check_sees_a_cycle_held_by_a_bottom_or_function_import():
    sources = {
        "portal.pipeline.a": ("from portal.pipeline import b\n", False),
        "portal.pipeline.b": ("def f():\n    from portal.pipeline.c import g\n", False),
        "portal.pipeline.c": ("x = 1\nfrom portal.pipeline.a import y  # noqa: E402\n", False),
        "portal.pipeline.d": ("from . import a\n", False),
        "portal.pipeline": ("", True),
    }
    graph = _graph(sources)
    assert graph["portal.pipeline.d"] == {"portal.pipeline.a"}
    assert _cycles(graph) == [["portal.pipeline.a", "portal.pipeline.b", "portal.pipeline.c"]]


def test_the_check_sees_a_loop_between_rooms_that_no_module_cycle_shows():
    # The shape the commit plan and backfills once had, each import at a module's top.
    sources = {
        "portal.pipeline.destinations": ("", True),
        "portal.pipeline.destinations.publisher": ("from portal.pipeline import backfills\n", False),
        "portal.pipeline.destinations.write_modes": ("from portal.pipeline import errors\n", False),
        "portal.pipeline.backfills": ("from portal.pipeline.destinations import write_modes\n", False),
        "portal.pipeline.errors": ("", False),
        "portal.pipeline.cdc": ("", True),
        "portal.pipeline.cdc.pg": ("from portal.pipeline import errors\n", False),
        "portal.pipeline.sources": ("", True),
        "portal.pipeline.sources.cdc": ("from portal.pipeline.cdc import pg\n", False),
        "portal.pipeline": ("", True),
    }
    graph = _graph(sources)
    assert _cycles(graph) == []  # module by module, nothing to see
    rooms = _rooms(graph, "portal.pipeline")
    assert rooms["portal.pipeline.sources"] == {"portal.pipeline.cdc"}
    assert _cycles(rooms) == [["portal.pipeline.backfills", "portal.pipeline.destinations"]]
