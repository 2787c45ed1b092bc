"""A user who clones the repository follows the README's and docs' links:
every relative link lands on a file inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Inline links, [text](target), and reference definitions, [text]: target.
INLINE = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
EXTERNAL = ("http://", "https://", "mailto:")


def _relative_links(text: str) -> list[str]:
    targets = INLINE.findall(text) + REFERENCE.findall(text)
    return [t for t in targets if not t.startswith(EXTERNAL) and not t.startswith("#")]


def _broken_links(document: Path, root: Path) -> list[str]:
    broken = []
    for target in _relative_links(document.read_text()):
        path = (document.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(root) or not path.exists():
            broken.append(target)
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(document):
    assert _broken_links(document, ROOT) == [], f"{document.name} links to what a clone does not have"


def test_the_architecture_document_is_linked_from_the_readme():
    assert "docs/architecture.md" in _relative_links((ROOT / "README.md").read_text())


def test_links_out_of_the_clone_or_to_missing_files_are_caught(tmp_path):
    clone = tmp_path / "clone"
    (clone / "docs").mkdir(parents=True)
    (clone / "docs" / "here.md").write_text("x")
    (tmp_path / "shared.md").write_text("outside the clone")
    readme = clone / "README.md"
    readme.write_text(
        "[ok](docs/here.md#part) [up](../shared.md) [gone](docs/gone.md) [web](https://example.org) [top](#a)\n"
        "[ref]: docs/here.md\n"
    )
    assert _broken_links(readme, clone) == ["../shared.md", "docs/gone.md"]
