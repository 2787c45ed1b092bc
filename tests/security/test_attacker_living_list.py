"""The attacker matrix is a living list: every job property that says where data is read or
written (a path, a URL, a folder, a table, a namespace) has an attacker story in tests/security.

A key joins the list by its words, so a new `writer.foo.dir` or `source.bar.url` declared in the
property schema fails this test until somebody writes the story that tries to walk out with it.
"""

from __future__ import annotations

import re
from pathlib import Path

from portal.pipeline.propertyrules import NODE, SPECS

# A key says where data goes when one of its words is one of these.
REACHING_WORDS = frozenset(
    {"url", "uri", "dir", "path", "file", "warehouse", "table", "tables", "glob", "datasets", "jars", "urn"}
    | {"namespace", "option", "exclude"}
)
# Keys with such a word that say how much, not where.
SIZES = frozenset({"writer.file.max.records", "writer.target.file.size"})


def reaching_keys() -> list[str]:
    """The user's keys among them: a key the portal sets from the data nodes is tried, every one,
    by test_attacker_matrix's node-key stories (they walk the schema's node keys)."""
    return sorted(
        spec.key
        for spec in SPECS
        if set(spec.key.replace("<name>", "x").split(".")) & REACHING_WORDS
        and spec.key not in SIZES
        and spec.owner != NODE
    )


def stories() -> str:
    here = Path(__file__)
    return "\n".join(p.read_text() for p in here.parent.glob("test_*.py") if p != here)


def test_the_list_is_read_from_the_property_schema():
    keys = reaching_keys()
    assert {"source.files.datasets", "source.files.glob", "dataset.urn", "writer.jdbc.table"} <= set(keys)
    assert "source.files.path" not in keys  # a node key: every one has its story
    assert not SIZES & set(keys)


def test_every_key_that_says_where_data_goes_has_an_attacker_story():
    text = stories()
    missing = []
    for key in reaching_keys():
        literal = (
            re.escape(key.split("<name>")[0]) if "<name>" in key else re.escape(key) + r"(?:\.\d+)?[\"']"
        )
        if not re.search(r"[\"']" + literal, text):
            missing.append(key)
    assert missing == [], f"no attacker story in tests/security names {missing}"
