"""Forms of the template pack pages; validation itself lives in services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.accounts.grants import EntryProblem
from portal.form_errors import ServiceErrorsMixin


class PackCreateForm(ServiceErrorsMixin, forms.Form):
    name = forms.CharField(
        max_length=128, help_text="Letters, digits, '_', '.', '-'. Used in pack://<name>/… URIs."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    archive = forms.FileField(required=False, help_text="Optional .zip or .tar.gz of .template files.")


class ArchiveForm(ServiceErrorsMixin, forms.Form):
    archive = forms.FileField(help_text=".zip or .tar.gz of .template files; replaces the pack's templates.")


class TemplateForm(ServiceErrorsMixin, forms.Form):
    path = forms.CharField(max_length=500, help_text="e.g. jobs/jdbc-to-lake.template")
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "code"}),
        strip=False,
        required=False,
        help_text="HOCON. gobblin.template.inherit names a parent; required_attributes are enforced.",
    )


class AclForm(ServiceErrorsMixin, forms.Form):
    owners = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line: user:<name> or group:<name>. Owners edit the pack and this list.",
    )
    readers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line: user:<name> or group:<name>. Readers use the templates in flows.",
    )

    @staticmethod
    def initial_for(entries: list[dict[str, str]]) -> dict[str, str]:
        lines: dict[str, list[str]] = {"owner": [], "reader": []}
        for entry in entries:
            kind = "user" if "user" in entry else "group"
            lines[entry["role"]].append(f"{kind}:{entry[kind]}")
        return {"owners": "\n".join(lines["owner"]), "readers": "\n".join(lines["reader"])}

    def entries(self) -> list[dict[str, str]]:
        result = []
        self._lines: list[tuple[str, str]] = []  # (field, line) of each entry, in order
        for field, role in (("owners", "owner"), ("readers", "reader")):
            for line in self.cleaned_data.get(field, "").splitlines():
                line = line.strip()
                if not line:
                    continue
                kind, _, name = line.partition(":")
                if kind not in ("user", "group") or not name.strip():
                    self.add_error(field, f"{line!r}: write user:<name> or group:<name>.")
                    continue
                result.append({"role": role, kind: name.strip()})
                self._lines.append((field, line))
        return result

    def add_service_errors(self, error: ValidationError) -> None:
        """The service counts entries ("entry 3"); the person typed lines in two boxes: each
        entry's problem goes to the box and names the line it came from."""
        lines = getattr(self, "_lines", [])
        rest: dict[str, list[ValidationError]] = {}
        for field, items in getattr(error, "error_dict", {}).items():
            for item in items:
                index = (item.params or {}).get("index") if item.code == EntryProblem.CODE else None
                if isinstance(index, int) and 1 <= index <= len(lines):
                    box, line = lines[index - 1]
                    self.add_error(box, f"{line!r}: {item.params['problem']}")
                else:
                    rest.setdefault(field, []).append(item)
        if hasattr(error, "error_dict"):
            if rest:
                super().add_service_errors(ValidationError(rest))
            return
        super().add_service_errors(error)
