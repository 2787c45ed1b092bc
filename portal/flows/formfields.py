"""The flow form's inputs that are groups of inputs: property and secret rows
(prop-<n>-key / -value, secret-<n>-key / -value / -original), a chosen
template's attributes (attr:<name>) and the destination checkboxes. Each
widget reads its group from the posted data; each field turns it into the
value the form cleans."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms
from django.core.exceptions import ValidationError

MAX_ROWS = 500
ATTRIBUTE_INPUT = "attr:"
_ROW_INPUT = re.compile(r"^(?P<prefix>prop|secret)-(?P<index>\d{1,4})-(?:key|value|original)$")


def attribute_input_id(name: str) -> str:
    return "id_attr-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


@dataclass
class Row:
    """One key/value row; `original` is the stored key a secret row stands for."""

    key: str = ""
    value: str = ""
    original: str = ""

    @property
    def blank(self) -> bool:
        return not self.key.strip() and not self.value.strip()


class RowsWidget(forms.Widget):
    """Reads rows posted as <prefix>-<n>-key / -value / -original, any n
    (scripts add rows with the next number; gaps are fine). Rendered by
    templates/flows/partials/kv_rows.html, not by Django."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def value_from_datadict(self, data, files, name) -> list[Row]:
        indexes = sorted(
            {
                int(match["index"])
                for key in data
                if (match := _ROW_INPUT.match(key)) and match["prefix"] == self.prefix
            }
        )
        return [
            Row(*(data.get(f"{self.prefix}-{index}-{part}", "") for part in ("key", "value", "original")))
            for index in indexes
        ]

    def value_omitted_from_data(self, data, files, name) -> bool:
        return False  # no rows posted means no properties


class RowsField(forms.Field):
    def __init__(self, *, prefix: str, noun: str, **kwargs) -> None:
        self.noun = noun
        super().__init__(widget=RowsWidget(prefix), required=False, **kwargs)

    def to_python(self, value) -> list[Row]:
        return [row for row in value or [] if not row.blank]

    def validate(self, rows: list[Row]) -> None:
        if len(rows) > MAX_ROWS:
            raise ValidationError(f"At most {MAX_ROWS} rows.")
        problems, seen = [], set()
        for row in rows:
            key = row.key.strip()
            if not key:
                problems.append(
                    f"A {self.noun.lower()} has a value but no key; give it a key or clear the value."
                )
            elif key in seen:
                problems.append(f"{key!r} is given twice.")
            seen.add(key)
        if problems:
            raise ValidationError(list(dict.fromkeys(problems)))


class AttributesWidget(forms.Widget):
    """Reads the template attribute inputs, posted as attr:<name>."""

    def value_from_datadict(self, data, files, name) -> dict[str, str]:
        return {
            key[len(ATTRIBUTE_INPUT) :]: data.get(key, "")
            for key in data
            if key.startswith(ATTRIBUTE_INPUT) and key[len(ATTRIBUTE_INPUT) :].strip()
        }

    def value_omitted_from_data(self, data, files, name) -> bool:
        return False


class AttributesField(forms.Field):
    widget = AttributesWidget

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, **kwargs)

    def to_python(self, value) -> dict[str, str]:
        return {name.strip(): (text or "").strip() for name, text in (value or {}).items()}


class DestinationsWidget(forms.Widget):
    """Checkboxes named `destinations`; a comma-separated `destinations_text`
    is read when none are posted (scripts, and the form before it had
    checkboxes)."""

    def value_from_datadict(self, data, files, name) -> list[str]:
        if hasattr(data, "getlist") and data.getlist(name):
            return data.getlist(name)
        if isinstance(data.get(name), list):
            return data[name]
        return [item for item in (data.get("destinations_text") or "").split(",")]

    def value_omitted_from_data(self, data, files, name) -> bool:
        return False  # no box ticked means no destinations


class DestinationsField(forms.Field):
    widget = DestinationsWidget

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, **kwargs)

    def to_python(self, value) -> list[str]:
        return [item.strip() for item in value or [] if item and item.strip()]
