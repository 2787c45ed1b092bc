"""Size budgets that may only shrink: a module under portal/ holds at most 25 top-level
functions and classes, and ruff's C901 (complexity) and PLR0915 (statements) hold each
function; the modules over a budget when it came in are named baselines here and in
pyproject.toml, and an entry fails once it is no longer needed, so the baselines shrink."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS_BUDGET = 25
SIZE_RULES = {"C901", "PLR0915"}

# Modules over the definitions budget, with their count when the budget came in: a count may
# only go down, and an entry at or under the budget must go.
DEFINITIONS_BASELINE: dict[str, int] = {
    "portal/orchestration/status.py": 28,
    "portal/pipeline/landing.py": 30,
    "portal/quotas/services.py": 28,
    "portal/templatepacks/hocon.py": 33,
    "portal/topology/services.py": 36,
    "portal/topology/views.py": 30,
}


def top_level_definitions(source: str) -> int:
    """Functions and classes at a module's top level (imports and constants are not counted)."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return sum(isinstance(node, kinds) for node in ast.parse(source).body)


def definition_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): top_level_definitions(path.read_text())
        for path in (ROOT / "portal").rglob("*.py")
        if "migrations" not in path.parts
    }


def test_no_module_grows_past_the_definitions_budget():
    counts = definition_counts()
    over = {p: n for p, n in counts.items() if n > DEFINITIONS_BUDGET and p not in DEFINITIONS_BASELINE}
    assert over == {}, f"split these modules by concept (budget {DEFINITIONS_BUDGET})"
    grown = {p: counts.get(p) for p, n in DEFINITIONS_BASELINE.items() if counts.get(p, 0) > n}
    assert grown == {}, "a baseline module may only shrink"


def test_the_definitions_baseline_only_names_modules_still_over_it():
    counts = definition_counts()
    shrunk = {p: counts.get(p) for p in DEFINITIONS_BASELINE if counts.get(p, 0) <= DEFINITIONS_BUDGET}
    assert shrunk == {}, "under budget now (or gone): remove from DEFINITIONS_BASELINE"
    lower = {p: counts[p] for p, n in DEFINITIONS_BASELINE.items() if p in counts and counts[p] < n}
    assert lower == {}, "lower the baseline's count to what the module holds now"


def test_top_level_definitions_count_functions_and_classes_only():
    source = "import os\nX = 1\ndef f(): pass\nasync def g(): pass\nclass C:\n    def m(self): pass\n"
    assert top_level_definitions(source) == 3


def ruff_baseline() -> dict[str, set[str]]:
    """pyproject.toml's per-file size baseline: file → the size rules it is excused from."""
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    return {
        path: set(rules) & SIZE_RULES
        for path, rules in lint["per-file-ignores"].items()
        if set(rules) & SIZE_RULES and not path.startswith("tests/")
    }


def test_the_ruff_size_baseline_names_only_what_still_breaks_a_budget():
    baseline = ruff_baseline()
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--exit-zero", "--output-format", "json"]
        + ["--select", ",".join(sorted(SIZE_RULES)), "--config", "lint.per-file-ignores = {}"]
        + [path for path in baseline if (ROOT / path).exists()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    breaking: dict[str, set[str]] = {}
    for problem in json.loads(found.stdout):
        breaking.setdefault(Path(problem["filename"]).relative_to(ROOT).as_posix(), set()).add(
            problem["code"]
        )
    not_needed = {path: rules - breaking.get(path, set()) for path, rules in baseline.items()}
    assert {path: rules for path, rules in not_needed.items() if rules} == {}, (
        "within budget now: remove these from pyproject.toml's SIZE BASELINE"
    )
