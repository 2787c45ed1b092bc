"""No test module imports another test module, and no module imports a conftest: what two
tests share is a builder in a package (tests/builders/, tests/factories.py), so a test module
can be moved, renamed or deleted on its own, pytest never collects one module's tests through
another, and a conftest holds only its directory's fixtures.
Read from the source with `ast`, so an import in a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def imported_test_modules(source: str, module: str) -> set[str]:
    """Modules named `test_*` that the source of `module` imports, absolute or relative."""
    package = module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        found |= {name for name in names if name.rsplit(".", 1)[-1].startswith("test_") or _is_conftest(name)}
    return found


def _is_conftest(name: str) -> bool:
    return "conftest" in name.split(".")


def pairs_found() -> set[tuple[str, str]]:
    """Every (importer, imported test module) pair under tests/, browser tests' node_modules aside."""
    return {
        (module_of(path), imported)
        for path in TESTS.rglob("*.py")
        if "node_modules" not in path.parts
        for imported in imported_test_modules(path.read_text(), module_of(path))
    }


def test_no_test_module_imports_another():
    assert pairs_found() == set(), "move what they share into tests/builders/"


def test_the_check_sees_an_absolute_a_relative_and_a_hidden_import():
    source = (
        "from tests.unit.flows.test_flow_form import new_flow\n"
        "from .test_bulk import x\n"
        "from ..builders import keys\n"
        "from tests.security.conftest import World\n"
        "from .conftest import mysql\n"
        "def f():\n    import tests.builders.keys\n    from tests.unit import test_lock_files\n"
    )
    assert imported_test_modules(source, "tests.unit.test_probe") == {
        "tests.unit.flows.test_flow_form",
        "tests.unit.test_bulk",
        "tests.unit.test_lock_files",
        "tests.security.conftest",
        "tests.security.conftest.World",
        "tests.unit.conftest",
        "tests.unit.conftest.mysql",
    }
