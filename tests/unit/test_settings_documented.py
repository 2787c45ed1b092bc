"""Every environment variable the portal reads is in the README's configuration table and in
`.env.example`: an operator learns of a setting from the documents, not from the source."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# settings.env / env_int / env_bool / env_list / env_secret ("NAME", ...) and os.environ reads.
# Python's own, which the pipeline extends for Spark's Python workers; not a setting of ours.
NOT_SETTINGS = {"PYTHONPATH"}
READ = re.compile(r"""\b(?:env(?:_[a-z]+)?|environ\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def read_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "portal").rglob("*.py"):
        names.update(READ.findall(path.read_text()))
    return names - NOT_SETTINGS


def test_every_variable_the_portal_reads_is_documented():
    names = read_names()
    assert len(names) > 50  # the scan found the settings
    readme, example = (ROOT / "README.md").read_text(), (ROOT / ".env.example").read_text()
    assert sorted(name for name in names if name not in readme) == []
    assert sorted(name for name in names if name not in example) == []
