"""The flow form. Field rules come from the model's validators and clean(),
the same ones the API goes through (via flows.services)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.flows.models import FlowConfig


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


class FlowConfigForm(forms.ModelForm):
    properties_text = forms.CharField(
        label="Properties",
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 6, "placeholder": "source.jdbc.tables=orders\nwriter.output.format=parquet"}
        ),
        help_text="One key=value per line.",
    )
    destinations_text = forms.CharField(
        label="Destinations",
        required=False,
        help_text="Data node names, comma-separated.",
    )

    class Meta:
        model = FlowConfig
        fields = [
            "flow_group",
            "flow_name",
            "description",
            "source",
            "schedule",
            "run_immediately",
            "template_uris",
        ]
        labels = {"flow_group": "Flow group", "flow_name": "Flow name", "template_uris": "Templates"}
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "template_uris": forms.TextInput(attrs={"placeholder": "pack://team-pack/ingest/jdbc.template"}),
            "schedule": forms.TextInput(attrs={"placeholder": "*/15 * * * *"}),
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            # The key is the flow's identity; show it, never change it.
            for name in ("flow_group", "flow_name"):
                self.fields[name].disabled = True
            self.fields["properties_text"].initial = "\n".join(
                f"{k}={v}" for k, v in sorted(self.instance.properties.items())
            )
            self.fields["destinations_text"].initial = ", ".join(self.instance.destinations)

    def clean_properties_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["properties_text"])

    def clean_destinations_text(self) -> list[str]:
        return [d.strip() for d in self.cleaned_data["destinations_text"].split(",") if d.strip()]

    def flow_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        data["properties"] = self.cleaned_data.get("properties_text", {})
        data["destinations"] = self.cleaned_data.get("destinations_text", [])
        return data

    def add_model_errors(self, error: ValidationError) -> None:
        """Place errors raised by the service next to the field they name."""
        mapping = {"properties": "properties_text", "destinations": "destinations_text"}
        if hasattr(error, "error_dict"):
            for field, messages in error.message_dict.items():
                target = mapping.get(field, field)
                self.add_error(target if target in self.fields else None, messages)
        else:
            self.add_error(None, error.messages)
