"""Topology forms. Field rules come from the models (validators, clean()),
the same ones the API and the topology file go through via services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.property_lines import parse_property_lines
from portal.topology.models import DataNode, SpecExecutor


def _map_text(mapping: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(mapping.items()))


class _ServiceErrorsMixin:
    """Place errors raised by a service next to the field they name."""

    text_fields: dict[str, str] = {}

    def add_service_errors(self, error: ValidationError) -> None:
        if hasattr(error, "error_dict"):
            for field, messages in error.message_dict.items():
                target = self.text_fields.get(field, field)
                self.add_error(target if target in self.fields else None, messages)
        else:
            self.add_error(None, error.messages)


class DataNodeForm(_ServiceErrorsMixin, forms.ModelForm):
    text_fields = {"properties": "properties_text"}
    properties_text = forms.CharField(
        label="Connection properties",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "path=var/data/lake"}),
        help_text="One key=value per line (url, path, driver…). Secrets only as ENC(...).",
    )

    class Meta:
        model = DataNode
        fields = ["name", "kind", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["properties_text"].initial = _map_text(self.instance.properties)

    def clean_properties_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["properties_text"])

    def node_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        data["properties"] = self.cleaned_data.get("properties_text", {})
        return data

    def _post_clean(self) -> None:
        # Model validation happens once, in the service, on the real values.
        pass


class SpecExecutorForm(_ServiceErrorsMixin, forms.ModelForm):
    text_fields = {"spark_conf": "spark_conf_text"}
    spark_conf_text = forms.CharField(
        label="Spark conf",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "spark.sql.shuffle.partitions=8"}),
        help_text="One spark.key=value per line.",
    )

    class Meta:
        model = SpecExecutor
        fields = [
            "name",
            "uri",
            "technology",
            "location",
            "queue",
            "spark_master",
            "description",
            "enabled",
            "cost",
        ]
        labels = {"uri": "URI", "spark_master": "Spark master", "queue": "Queue (communication mechanism)"}
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["spark_conf_text"].initial = _map_text(self.instance.spark_conf)

    def clean_spark_conf_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["spark_conf_text"])

    def executor_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        data["spark_conf"] = self.cleaned_data.get("spark_conf_text", {})
        return data

    def _post_clean(self) -> None:
        pass


class CapabilityForm(forms.Form):
    source = forms.ModelChoiceField(queryset=DataNode.objects.all(), to_field_name="name")
    destination = forms.ModelChoiceField(queryset=DataNode.objects.all(), to_field_name="name")

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("source") and cleaned.get("source") == cleaned.get("destination"):
            raise ValidationError("Source and destination must be different data nodes.")
        return cleaned
