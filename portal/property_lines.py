"""Properties typed as text, `key=value` a line (the form of a Gobblin .pull
file): the flow form's and the topology forms' text areas read them here, a
module below every app."""

from __future__ import annotations

from django.core.exceptions import ValidationError


def parse_property_lines(text: str) -> dict[str, str]:
    """`key=value` per line; blank lines and `#` comments are ignored."""
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"Line {number}: write key=value, got {line[:60]!r}.")
        if key.strip() in properties:
            raise ValidationError(f"Line {number}: {key.strip()!r} is given twice.")
        properties[key.strip()] = value.strip()
    return properties
