"""Topology forms. Field rules come from the models (validators, clean()),
the same ones the API and the topology file go through via services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.accounts.access import Principal
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.form_errors import ServiceErrorsMixin
from portal.property_lines import parse_property_lines
from portal.topology import nodefields, policy, services
from portal.topology.models import DataNode, SpecExecutor
from portal.topology.validators import NOT_YET_RUNNABLE_KINDS


def _map_text(mapping: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(mapping.items()))


class DataNodeForm(ServiceErrorsMixin, forms.ModelForm):
    """The kind's connection fields (topology.nodefields: label, help, which
    pipeline keys they set; secrets as password boxes), then any other
    properties as key=value lines. Changing the kind re-renders the fields for
    it (htmx, `?part=fields`; without JavaScript, **Show the fields of this
    kind** posts the same). A secret typed in clear is encrypted by the service
    under the owner's customer key; left empty on an edit, the stored one stays.

    For a user who is not staff (`user_made`): only the kinds the policy allows,
    an **Owner** (themselves or one of their groups) when making it, and no
    other properties than the kind's fields (topology.policy)."""

    text_fields = {"properties": "properties_text", "secrets": "properties_text"}
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

    def __init__(self, *args, user: Principal | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.user_made = bool(self.instance.user_made) if self.instance.pk else self._self_service(user)
        stored = dict(self.instance.properties or {}) if self.instance.pk else {}
        self.stored = stored
        if self.instance.pk:
            self.fields["name"].disabled = True
        self.offered = self._offered_kinds()
        self._kind_field().choices = [
            (k, f"{label} (not yet runnable)" if k in NOT_YET_RUNNABLE_KINDS else label)
            for k, label in DataNode.Kind.choices
            if k in self.offered
        ]
        if self.user_made:
            del self.fields["properties_text"]
            if not self.instance.pk and user is not None:
                groups = list(user.groups.order_by("name").values_list("name", flat=True))
                self.fields["owner"] = forms.ChoiceField(
                    label="Owner",
                    required=False,
                    choices=[("", f"Me ({user.get_username()})"), *((g, f"Group {g}") for g in groups)],
                    help_text="Who owns the node: owners change it, share it and answer access requests.",
                )
        self.kind = self._chosen_kind()
        self.connection_fields = nodefields.fields_of(self.kind)
        area = policy.personal_area(user) if self.user_made and user is not None else None
        for spec in self.connection_fields:
            if spec.secret:
                stored_secret = bool(stored.get(spec.key))
                widget: forms.Widget = forms.PasswordInput(
                    render_value=False,
                    attrs={
                        "autocomplete": "new-password",
                        "placeholder": "(stored: type to replace)" if stored_secret else "",
                    },
                )
                initial = ""
            else:
                placeholder = area if spec.key == "path" and area else spec.placeholder
                widget = forms.TextInput(attrs={"placeholder": placeholder, "spellcheck": "false"})
                initial = stored.get(spec.key, "")
            self.fields[f"conn_{spec.key}"] = forms.CharField(
                label=spec.label,
                required=spec.required,
                help_text=spec.help_text,
                widget=widget,
                initial=initial,
            )
        if "properties_text" in self.fields:
            known = {spec.key for spec in self.connection_fields}
            hidden = {WRAPPED_KEY_PROPERTY}
            self.fields["properties_text"].initial = _map_text(
                {key: value for key, value in stored.items() if key not in known | hidden}
            )
        self.order_fields(
            [
                "name",
                "kind",
                "owner",
                "description",
                *(f"conn_{spec.key}" for spec in self.connection_fields),
            ]
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

    def _kind_field(self) -> forms.ChoiceField:
        field = self.fields["kind"]
        assert isinstance(field, forms.ChoiceField)  # the model field has choices
        return field

    @staticmethod
    def _self_service(user: Principal | None) -> bool:
        return user is not None and not (user.is_staff or user.is_superuser)

    def _offered_kinds(self) -> list[str]:
        """The policy's kinds for a user's own node; every kind a job can run for staff, plus
        the stored kind of a node made before its kind stopped being offered."""
        allowed = policy.current().kinds if self.user_made else DataNode.Kind.values
        kept = self.instance.kind if self.instance.pk else None
        return [
            k for k in DataNode.Kind.values if k in allowed and (k not in NOT_YET_RUNNABLE_KINDS or k == kept)
        ]

    def _chosen_kind(self) -> str:
        source = self.data if self.is_bound else self.initial
        kind = source.get("kind") or self.instance.kind or DataNode.Kind.FILES
        allowed = self.offered
        return kind if kind in allowed else (allowed[0] if allowed else DataNode.Kind.FILES)

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
        properties: dict[str, str] = {}
        secrets: dict[str, str] = {}
        for spec in self.connection_fields:
            value = self.cleaned_data.get(f"conn_{spec.key}", "").strip()
            if spec.secret and value and not looks_encrypted(value):
                secrets[spec.key] = value
            elif value:
                properties[spec.key] = value
            elif spec.secret and self.stored.get(spec.key):
                properties[spec.key] = self.stored[spec.key]  # left empty: the stored one stays
        properties.update(self.cleaned_data.get("properties_text", {}))
        if any(looks_encrypted(value) for value in properties.values()) and self.stored.get(
            WRAPPED_KEY_PROPERTY
        ):
            properties.setdefault(WRAPPED_KEY_PROPERTY, self.stored[WRAPPED_KEY_PROPERTY])
        data["properties"] = properties
        if secrets:
            data["secrets"] = secrets
        if self.cleaned_data.get("owner"):
            data["owner"] = self.cleaned_data["owner"]
        return data

    def add_service_errors(self, error: ValidationError) -> None:
        """A problem the model reports as "<key>: reason" goes to that key's field."""
        if hasattr(error, "error_dict") and (
            "properties" in error.message_dict or "secrets" in error.message_dict
        ):
            fields = {spec.key: f"conn_{spec.key}" for spec in self.connection_fields}
            others: dict[str, list[str]] = {
                k: v for k, v in error.message_dict.items() if k not in ("properties", "secrets")
            }
            for name in ("properties", "secrets"):
                remaining = []
                for message in error.message_dict.get(name, []):
                    key = next((k for k in fields if message.startswith((f"{k}: ", f"'{k}' "))), None)
                    if key is None:
                        remaining.append(message)
                    else:
                        self.add_error(fields[key], message.removeprefix(f"{key}: "))
                if remaining:
                    others.setdefault(
                        "properties" if "properties_text" in self.fields else "__all__", []
                    ).extend(remaining)
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
            "user_sources",
            "user_destinations",
        ]
        labels = {
            "uri": "URI",
            "spark_master": "Spark master",
            "queue": "Queue (communication mechanism)",
            "user_sources": "Serves user-made sources of kinds",
            "user_destinations": "Serves user-made destinations of kinds",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["spark_conf_text"].initial = _map_text(self.instance.spark_conf)
        if self.instance.pk and self.instance.enabled:
            # Unticking it here disables as the page's Disable… does: say what that does first.
            routed = services.flows_routed_through(self.instance)
            self.fields["enabled"].help_text = (
                f"Unticked, the {routed} flow{'s' if routed != 1 else ''} routed through it "
                f"{'go' if routed != 1 else 'goes'} to pending unless another enabled executor can run "
                f"{'their' if routed != 1 else 'its'} hops."
                if routed
                else "No flow is routed through it now."
            )

    def clean_spark_conf_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["spark_conf_text"])

    def executor_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        data["spark_conf"] = self.cleaned_data.get("spark_conf_text", {})
        return data

    def _post_clean(self) -> None:
        pass


class CapabilityForm(forms.Form):
    """Between administrators' nodes: user-made ones are routed by the executors' policy."""

    source = forms.ModelChoiceField(queryset=DataNode.objects.filter(user_made=False), to_field_name="name")
    destination = forms.ModelChoiceField(
        queryset=DataNode.objects.filter(user_made=False), to_field_name="name"
    )

    def clean(self) -> dict:
        super().clean()  # fills self.cleaned_data (and returns it)
        cleaned = self.cleaned_data
        if cleaned.get("source") and cleaned.get("source") == cleaned.get("destination"):
            raise ValidationError("Source and destination must be different data nodes.")
        return cleaned
