"""Unified diffs of pack history, line by line with the kind of each line,
so the page can colour additions, removals and hunk headers."""

from __future__ import annotations

from django import template

register = template.Library()


def _kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "same"


@register.filter
def diff_lines(diff: str) -> list[tuple[str, str]]:
    return [(_kind(line), line) for line in diff.splitlines()]
