"""The flow form, for creating and editing alike.

Field rules come from the model's validators and clean(), from
templatepacks (which templates the owner may use, which attributes they
leave unset) and from the keys app (secret values); the API goes through the
same ones via flows.services. This module only collects input; putting each
error next to the input it is about is flows.formerrors', what the page shows
around the fields and the compile preview are flows.formpage's.

What a browser posts: flow_group, flow_name, description, source,
destinations (repeated), template_uris, attr:<name> (one per attribute the
chosen template asks for), schedule, run_immediately, prop-<n>-key /
prop-<n>-value (property rows), properties_text (key=value lines),
secret-<n>-key / secret-<n>-value / secret-<n>-original (secret rows; a blank
value keeps the stored ciphertext of <original>). A comma-separated
destinations_text is read when no destinations are posted.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from portal.crypto.encrypted import ENCRYPTED_MASK, WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.flows import attributes, choices, formerrors, secrets
from portal.flows.attributes import TemplateAttributes
from portal.flows.compiler import scoped
from portal.flows.formfields import (
    AttributesField,
    DestinationsField,
    Row,
    RowsField,
)
from portal.flows.models import FlowConfig
from portal.flows.secrets import SecretEncrypter, with_column_rules_key
from portal.pipeline.destinations.table_templates import KEY as TABLE_KEY
from portal.pipeline.destinations.table_templates import PLACEHOLDER as TABLE_PLACEHOLDER
from portal.pipeline.destinations.write_modes import KEY as WRITE_MODE_KEY
from portal.pipeline.destinations.write_modes import KEYED, PRIMARY_KEY
from portal.pipeline.destinations.write_modes import MODES as WRITE_MODES
from portal.property_lines import parse_property_lines
from portal.topology import picker

# What a secret looks like wherever it is not yet encrypted (previews): the
# keys app's mask, so it is never mistaken for a value.
NOT_YET_ENCRYPTED = ENCRYPTED_MASK
BLANK_ROWS = 2
# portal.pipeline.badrows's limits (named here: that module loads Spark, which the web tier does not).
MAX_COUNT, MAX_FRACTION = "errors.max.count", "errors.max.fraction"
# Fields rendered as a group of inputs (a fieldset with this id: field-<name>).
GROUPS = ("destinations", "properties", "secrets")


def destination_mode_field(node: str) -> str:
    """The form field of one destination's write mode (its name mirrors the property's)."""
    return f"write_mode@{node}"


def destination_table_field(node: str) -> str:
    """The form field of a database destination's table."""
    return f"table@{node}"


class FlowConfigForm(forms.ModelForm):
    destinations = DestinationsField(
        label="Destinations",
        help_text="Tick every data node the data should reach; the compiler finds the executors.",
    )
    attributes = AttributesField(label="Template attributes")
    write_mode = forms.ChoiceField(
        label="Write mode",
        required=False,
        choices=[("", "append: add the rows (default)"), *((m, m) for m in WRITE_MODES if m != "append")],
        help_text="overwrite: each run replaces the dataset at once (readers never see half); merge: the "
        "latest row per primary key wins; history: every version kept per key with valid_from, valid_to "
        f"and is_current. Stored as {WRITE_MODE_KEY}; the same for files, JDBC and Iceberg.",
    )
    primary_key = forms.CharField(
        label="Primary key",
        required=False,
        max_length=500,
        help_text="Column(s) that identify a row, comma-separated (e.g. id or region,order_id); "
        f"merge and history need it. Stored as {PRIMARY_KEY}.",
    )
    errors_max_count = forms.IntegerField(
        label="Bad records allowed, as a count",
        required=False,
        min_value=0,
        help_text="CSV and JSON records that cannot be read are set aside (beside the dataset, or in an "
        "error table beside a database or Iceberg table) up to this many per task; more fail the run. "
        f"Both limits empty: none allowed. Stored as {MAX_COUNT}.",
    )
    errors_max_fraction = forms.FloatField(
        label="Bad records allowed, as a share of the records read",
        required=False,
        min_value=0,
        max_value=1,
        help_text=f"From 0 to 1 (0.01 is 1 %); a task past either limit fails. Stored as {MAX_FRACTION}.",
    )
    properties = RowsField(
        prefix="prop",
        noun="Property",
        label="Properties",
        help_text="Job properties, e.g. source.jdbc.tables = orders. They win over the template's. "
        "Empty a row's key and value to remove it.",
    )
    properties_text = forms.CharField(
        label="Paste properties",
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 4,
                "spellcheck": "false",
                "placeholder": "source.jdbc.tables=orders\nwriter.output.format=parquet",
            }
        ),
        help_text="One key=value per line, e.g. from a Gobblin .pull file; added to the rows above.",
    )
    secrets = RowsField(
        prefix="secret",
        noun="Secret",
        label="Secret properties",
        help_text="Passwords and tokens. Encrypted with your customer key before they are stored; "
        "never shown again. Leave a value empty to keep the stored one.",
    )

    class Meta:
        model = FlowConfig
        fields = [
            "flow_group",
            "flow_name",
            "description",
            "source",
            "destinations",
            "template_uris",
            "schedule",
            "run_immediately",
        ]
        labels = {
            "flow_group": "Flow group",
            "flow_name": "Flow name",
            "source": "Source",
            "template_uris": "Job template",
            "schedule": "Schedule",
            "run_immediately": "Run immediately after saving",
        }
        help_texts = {
            "flow_group": "Letters, digits, '_', '.' or '-'; with the name, the flow's key.",
            "flow_name": "Letters, digits, '_', '.' or '-'. The key cannot change later.",
            "source": "The data node the data is read from.",
            "template_uris": (
                "From the template packs you can read. The fields a template asks for appear below: "
                "those in its gobblin.template.required_attributes. A template can describe one with "
                'flowport.attribute.<name>.description = "…" and suggest a value with '
                'flowport.attribute.<name>.default = "…".'
            ),
            "schedule": (
                "Unix cron, 5 fields (*/15 * * * *), or Gobblin's Quartz form (0 0/15 * * * ?). "
                "Empty runs the flow once, as soon as it is saved."
            ),
            "run_immediately": (
                "For a scheduled flow: run once now as well as at its ticks. A flow without a "
                "schedule runs once on save either way."
            ),
        }
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "source": forms.Select(),
            "template_uris": forms.Select(),
            "schedule": forms.TextInput(
                attrs={"placeholder": "*/15 * * * *", "spellcheck": "false", "autocomplete": "off"}
            ),
        }

    def __init__(self, data=None, *, instance: FlowConfig | None = None, user=None, encrypt: bool = False):
        """`user` is whose template packs and customer key count (the flow's
        owner); without one (the topology compile preview) pack access and
        secrets are not checked. `encrypt` makes secret values ciphertext
        (only when saving; previews use a placeholder)."""
        super().__init__(data, instance=instance)
        self.user = user
        self.encrypt = encrypt
        self.editing = self.instance.pk is not None
        self.merged_properties: dict[str, str] = {}
        self.attribute_errors: dict[str, list[str]] = {}
        # Offered: sources the owner may read, destinations they may write (topology.grants).
        owner = self.instance.owner if self.editing and self.instance.owner_id else user
        self.nodes = choices.destination_nodes(owner)
        source = self.data.get("source", "") if self.is_bound else self.instance.source
        self.fields["source"].widget.choices = choices.source_choices(
            choices.source_nodes(owner), source or ""
        )
        self.fields["template_uris"].widget.choices = choices.template_choices(user, self.chosen_templates)
        for name in ("source", "template_uris"):
            self.fields[name].widget.attrs.pop("maxlength", None)  # a select has none
        if self.editing:
            for name in ("flow_group", "flow_name"):
                # Shown and posted (previews compile with it), never changed.
                self.fields[name].required = False
                self.fields[name].widget.attrs["readonly"] = True
                self.fields[name].help_text = "The flow's key; it cannot change."
        if self.editing:
            self.initial.setdefault("write_mode", self.stored.get(WRITE_MODE_KEY, "").lower())
            self.initial.setdefault("primary_key", self.stored.get(PRIMARY_KEY, ""))
            self.initial.setdefault("errors_max_count", self.stored.get(MAX_COUNT, ""))
            self.initial.setdefault("errors_max_fraction", self.stored.get(MAX_FRACTION, ""))
        self._add_destination_write_modes()
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("aria-describedby", self.describedby(name))

    def _add_destination_write_modes(self) -> None:
        """A write mode for each destination the owner may write to, over the flow's: stored as
        ``destination.<node>.writer.write.mode``, which the compiler gives the hop landing there
        (flows.compiler.scoped)."""
        for node in self.nodes:
            name = destination_mode_field(node.name)
            self.fields[name] = forms.ChoiceField(
                label=f"Into {node.name}",
                required=False,
                choices=[("", "the write mode above"), *((m, m) for m in WRITE_MODES)],
            )
            stored = self.stored.get(scoped.scoped_key(WRITE_MODE_KEY, node.name), "")
            self.initial.setdefault(name, stored.lower())
            if node.kind == "jdbc":
                self._add_destination_table(node.name)

    def _add_destination_table(self, node: str) -> None:
        """A database destination's table, stored as ``destination.<node>.writer.jdbc.table``; left
        empty, each table the flow reads keeps its own name there (``{table}``)."""
        name = destination_table_field(node)
        self.fields[name] = forms.CharField(
            label=f"Table in {node}",
            required=False,
            max_length=200,
            help_text=(
                "Left empty: each table keeps its source name ({table}). A name (analytics.orders), or a "
                "pattern with {table} (copy_{table}) for a flow that reads several tables."
            ),
            widget=forms.TextInput(attrs={"placeholder": TABLE_PLACEHOLDER, "spellcheck": "false"}),
        )
        self.initial.setdefault(name, self.stored.get(scoped.scoped_key(TABLE_KEY, node), ""))

    # --- the fields' inputs ------------------------------------------------

    def describedby(self, name: str) -> str:
        ids = [f"id_{name}_helptext"] if self.fields[name].help_text else []
        return " ".join([*ids, f"id_{name}_errors"])

    @property
    def chosen_templates(self) -> str:
        if self.is_bound:
            return (self.data.get("template_uris") or "").strip()
        return self.instance.template_uris

    def template_attributes(self) -> TemplateAttributes:
        if not hasattr(self, "_template_attributes"):
            self._template_attributes = attributes.template_attributes(
                self.chosen_templates, self.user, self.template_loader
            )
        return self._template_attributes

    @property
    def stored(self) -> dict[str, str]:
        return self.instance.properties if self.editing else {}

    def posted(self, name: str) -> Any:
        """A field's value as its to_python reads the posted data (before validation)."""
        field = self.fields[name]
        return field.to_python(field.widget.value_from_datadict(self.data, None, name))

    def rows(self, name: str) -> list[Row]:
        if self.is_bound:
            return self.posted(name)
        return []

    # --- validation -----------------------------------------------------------

    def clean_flow_group(self) -> str:
        return self.instance.flow_group if self.editing else self.cleaned_data["flow_group"]

    def clean_flow_name(self) -> str:
        return self.instance.flow_name if self.editing else self.cleaned_data["flow_name"]

    def clean_properties_text(self) -> dict[str, str]:
        return parse_property_lines(self.cleaned_data["properties_text"])

    def clean_destinations(self) -> list[str]:
        """Ticked boxes come in page order; the ones the flow had keep theirs."""
        ticked = self.cleaned_data["destinations"]
        kept = [name for name in self._stored_destinations if name in ticked]
        return kept + [name for name in ticked if name not in kept]

    @property
    def _stored_destinations(self) -> list[str]:
        return list(self.instance.destinations) if self.editing else []

    def clean(self) -> dict:  # noqa: C901
        super().clean()  # fills self.cleaned_data (and returns it)
        cleaned = self.cleaned_data
        properties: dict[str, str] = {}
        origin: dict[str, str] = {}

        def put(key: str, value: str, where: str, field: str) -> None:
            if key in properties:
                self.add_error(field, f"{key!r} is set twice: in {origin[key]} and in {where}.")
                return
            properties[key], origin[key] = value, where

        encrypted = self.template_attributes().encrypted_names
        secrets = [
            Row(name, value, name)
            for name, value in cleaned.get("attributes", {}).items()
            if name in encrypted
        ]
        for name, value in cleaned.get("attributes", {}).items():
            if value and name not in encrypted:
                put(name, value, "the template attributes", "attributes")
        for row in cleaned.get("properties", []):
            put(row.key.strip(), row.value.strip(), "the properties", "properties")
        for key, value in (cleaned.get("properties_text") or {}).items():
            put(key, value, "the pasted lines", "properties_text")
        source = cleaned.get("source") or ""
        for key, value in picker.picked_properties(self.data, picker.source_kind(source)).items():
            if key == "extract.is.full" and {key, "extract.delta.fields"} & properties.keys():
                continue  # the picker's "no watermark" gives way to one typed in the properties
            put(key, value, "the source picker", "source")
        self._put_write_mode(cleaned, properties, put)
        for field, key in (("errors_max_count", MAX_COUNT), ("errors_max_fraction", MAX_FRACTION)):
            if cleaned.get(field) is not None:
                put(key, f"{cleaned[field]:g}", "the bad-record limits", field)
        for key, value in self._secret_values(secrets, "attributes", required=False).items():
            put(key, value, "the template attributes", "attributes")
        for key, value in self._secret_values(cleaned.get("secrets", []), "secrets").items():
            put(key, value, "the secret properties", "secrets")
        # Column rules work under the owner's key (none: the save says to add one), as in the API.
        properties = with_column_rules_key(self.user, properties, self.stored)
        if self._wrapped_key and any(looks_encrypted(value) for value in properties.values()):
            if properties.get(WRAPPED_KEY_PROPERTY, self._wrapped_key) != self._wrapped_key:
                self.add_error(
                    "properties", f"{WRAPPED_KEY_PROPERTY!r} is managed by the form; remove its row."
                )
            properties[WRAPPED_KEY_PROPERTY] = self._wrapped_key
        self.merged_properties = properties
        # The model validates the merged properties next (its validators, the keys app's ENC(...)
        # form checks; ModelForm builds the instance from Meta.fields only, which leaves this
        # alone), as for the API. Placeholders of secrets not yet encrypted are left out.
        self.instance.properties = {k: v for k, v in properties.items() if v != NOT_YET_ENCRYPTED}
        return cleaned

    def _put_write_mode(self, cleaned: dict, properties: dict[str, str], put: Any) -> None:
        """The write mode and primary key fields as the properties they stand for; a key the
        source picker ticked is the same key, not a second one."""
        mode, keys = cleaned.get("write_mode") or "", (cleaned.get("primary_key") or "").strip()
        if mode:
            put(WRITE_MODE_KEY, mode, "the write mode", "write_mode")
        if keys and properties.get(PRIMARY_KEY) != keys:
            put(PRIMARY_KEY, keys, "the primary key", "primary_key")
        if mode in KEYED and not properties.get(PRIMARY_KEY):
            self.add_error("primary_key", f"{mode} needs a primary key: the column(s) that identify a row.")
        for node in cleaned.get("destinations") or []:
            table = (cleaned.get(destination_table_field(node)) or "").strip()
            if table:
                put(
                    scoped.scoped_key(TABLE_KEY, node),
                    table,
                    f"the table in {node}",
                    destination_table_field(node),
                )
            field = destination_mode_field(node)
            chosen = cleaned.get(field) or ""
            if not chosen:
                continue
            put(scoped.scoped_key(WRITE_MODE_KEY, node), chosen, f"the write mode into {node}", field)
            if chosen in KEYED and not properties.get(PRIMARY_KEY):
                self.add_error(
                    field, f"{chosen} into {node} needs a primary key: the column(s) that identify a row."
                )

    @cached_property
    def template_loader(self):
        return attributes.template_loader(self.user)

    @cached_property
    def _encrypter(self) -> SecretEncrypter:
        return secrets.SecretEncrypter(self.user, self.stored)

    @property
    def _wrapped_key(self) -> str | None:
        """The key the flow's ENC values are under: the new one when this form
        encrypted something, else the one the flow has."""
        return self._encrypter._wrapped_key or self.stored.get(WRAPPED_KEY_PROPERTY)

    def _secret_values(self, rows: list[Row], field: str, *, required: bool = True) -> dict[str, str]:  # noqa: C901
        """key → ENC(...) for secret inputs: typed values are encrypted (when
        saving; a placeholder otherwise), a blank one keeps the ciphertext
        stored under its original key."""
        values: dict[str, str] = {}
        problems: list[str] = []
        for row in rows:
            key = row.key.strip()
            kept = self.stored.get(row.original, "") if row.original else ""
            if not key:
                continue  # reported by RowsField
            if row.value and self.encrypt:
                if not problems:
                    try:
                        values[key] = self._encrypter.encrypt(row.value)
                    except ValidationError as error:
                        problems.extend(error.messages)
            elif row.value:
                values[key] = NOT_YET_ENCRYPTED
            elif looks_encrypted(kept):
                values[key] = kept
            elif required and self.encrypt:
                problems.append(f"Type the value of secret {key!r}.")
            elif required:
                values[key] = NOT_YET_ENCRYPTED  # previews never see typed secrets
        if problems:
            self.add_error(field, list(dict.fromkeys(problems)))
        return values

    def full_clean(self) -> None:
        """Django's validation (the fields, clean(), then the model's validators and clean() on
        the instance with the merged properties), then each error moved beside the input it is
        about (flows.formerrors)."""
        super().full_clean()
        if self.is_bound:
            formerrors.after_clean(self)

    # --- what flows.services gets --------------------------------------------

    def flow_data(self) -> dict:
        data = {field: self.cleaned_data[field] for field in self.Meta.fields if field in self.cleaned_data}
        data["properties"] = dict(self.merged_properties)
        return data

    def add_model_errors(self, error: ValidationError) -> None:
        """Errors raised by flows.services.validate_flow, beside the input they name (flows.formerrors)."""
        formerrors.place(self, error)
