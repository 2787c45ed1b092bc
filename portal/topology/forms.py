"""Topology forms. Field rules come from the models (validators, clean()),
the same ones the API and the topology file go through via services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.form_errors import ServiceErrorsMixin
from portal.property_lines import parse_property_lines
from portal.topology import nodefields
from portal.topology.models import DataNode, SpecExecutor


def _map_text(mapping: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(mapping.items()))


class DataNodeForm(ServiceErrorsMixin, forms.ModelForm):
    """The kind's connection fields (topology.nodefields: label, help, which
    pipeline keys they set; secrets as password fields taking ENC(...)), then
    any other properties as key=value lines. Changing the kind re-renders the
    fields for it (htmx, `?part=fields`)."""

    text_fields = {"properties": "properties_text"}
    properties_text = forms.CharField(
        label="Other properties",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "fetchsize=10000"}),
        help_text="One key=value per line, beyond the fields above. Secrets only as ENC(...).",
    )

    class Meta:
        model = DataNode
        fields = ["name", "kind", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        stored = dict(self.instance.properties or {}) if self.instance.pk else {}
        if self.instance.pk:
            self.fields["name"].disabled = True
        self.kind = self._chosen_kind()
        self.connection_fields = nodefields.fields_of(self.kind)
        for spec in self.connection_fields:
            widget = (
                forms.PasswordInput(
                    render_value=True, attrs={"placeholder": "ENC(...)", "autocomplete": "off"}
                )
                if spec.secret
                else forms.TextInput(attrs={"placeholder": spec.placeholder, "spellcheck": "false"})
            )
            self.fields[f"conn_{spec.key}"] = forms.CharField(
                label=spec.label,
                required=spec.required,
                help_text=spec.help_text,
                widget=widget,
                initial=stored.get(spec.key, ""),
            )
        known = {spec.key for spec in self.connection_fields}
        self.fields["properties_text"].initial = _map_text(
            {key: value for key, value in stored.items() if key not in known}
        )
        self.order_fields(
            ["name", "kind", "description", *(f"conn_{spec.key}" for spec in self.connection_fields)]
        )
        self.fields["kind"].widget.attrs.update(
            {
                "hx-post": "?part=fields",
                "hx-trigger": "change",
                "hx-target": "#node-fields",
                "hx-select": "#node-fields",
                "hx-swap": "outerHTML",
                "hx-include": "closest form",
            }
        )

    def _chosen_kind(self) -> str:
        source = self.data if self.is_bound else self.initial
        kind = source.get("kind") or self.instance.kind or DataNode.Kind.FILES
        return kind if kind in DataNode.Kind.values else DataNode.Kind.FILES

    def clean_properties_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["properties_text"])

    def clean(self) -> dict:
        super().clean()  # fills self.cleaned_data (and returns it)
        cleaned = self.cleaned_data
        extra = cleaned.get("properties_text") or {}
        for spec in self.connection_fields:
            if spec.key in extra:
                self.add_error("properties_text", f"{spec.key!r} has its own field above; set it there.")
        return cleaned

    def node_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        properties = {
            spec.key: self.cleaned_data[f"conn_{spec.key}"].strip()
            for spec in self.connection_fields
            if self.cleaned_data.get(f"conn_{spec.key}", "").strip()
        }
        properties.update(self.cleaned_data.get("properties_text", {}))
        data["properties"] = properties
        return data

    def add_service_errors(self, error: ValidationError) -> None:
        """A problem the model reports as "<key>: reason" goes to that key's field."""
        if hasattr(error, "error_dict") and "properties" in error.message_dict:
            fields = {spec.key: f"conn_{spec.key}" for spec in self.connection_fields}
            remaining = []
            for message in error.message_dict["properties"]:
                key = next((k for k in fields if message.startswith((f"{k}: ", f"'{k}' "))), None)
                if key is None:
                    remaining.append(message)
                else:
                    self.add_error(fields[key], message.removeprefix(f"{key}: "))
            others = {k: v for k, v in error.message_dict.items() if k != "properties"}
            if remaining:
                others["properties"] = remaining
            if not others:
                return
            error = ValidationError(others)
        super().add_service_errors(error)

    def _post_clean(self) -> None:
        # Model validation happens once, in the service, on the real values.
        pass


class SpecExecutorForm(ServiceErrorsMixin, forms.ModelForm):
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
        super().clean()  # fills self.cleaned_data (and returns it)
        cleaned = self.cleaned_data
        if cleaned.get("source") and cleaned.get("source") == cleaned.get("destination"):
            raise ValidationError("Source and destination must be different data nodes.")
        return cleaned
