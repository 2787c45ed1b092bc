"""The flow form's page: what flows/flow_form.html and its htmx parts show beside the form's
fields (the attribute inputs, the property and secret rows, the destination boxes, the error
summary) and the compile preview. The form (flows.forms) reads and checks the input; this
module only presents it, and previews a flow through the save's own check
(flows.services.validate_flow), so the page never judges a flow another way than the save."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.core.exceptions import ValidationError

from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.flows import secrets, services
from portal.flows.compiler import CompiledFlow, scoped
from portal.flows.formfields import ATTRIBUTE_INPUT, AttributesWidget, Row, attribute_input_id
from portal.flows.forms import (
    BLANK_ROWS,
    GROUPS,
    MAX_COUNT,
    MAX_FRACTION,
    NOT_YET_ENCRYPTED,
    FlowConfigForm,
    destination_mode_field,
    destination_table_field,
)
from portal.pipeline.destinations.table_templates import KEY as TABLE_KEY
from portal.pipeline.destinations.write_modes import KEY as WRITE_MODE_KEY
from portal.pipeline.destinations.write_modes import PRIMARY_KEY
from portal.pipeline.propertyrules import PropertySpec, spec_for
from portal.topology import picker


def schema_help(spec: PropertySpec) -> str:
    """A key's description, allowed values and default, as docs/properties.md gives them."""
    parts = [spec.description]
    if spec.choices:
        parts.append(f"One of: {', '.join(spec.choices)}.")
    if spec.default is not None:
        parts.append(f"Default: {spec.default}.")
    return " ".join(parts)


class FlowFormPage:
    """One flow form as the page shows it."""

    def __init__(self, form: FlowConfigForm) -> None:
        self.form = form

    @property
    def nodes(self) -> list[Any]:
        return self.form.nodes

    @property
    def destination_mode_fields(self) -> list[Any]:
        return [self.form[destination_mode_field(node.name)] for node in self.form.nodes]

    @cached_property
    def picker(self) -> dict[str, object] | None:
        """The source picker as the user left it, when the form comes back with its picks (a
        refused save): shown again with every choice, not reset to its button; on Edit, as the
        flow's properties say it was left (`picker.restored`)."""
        form = self.form
        if not form.is_bound:
            return self._restored_picks
        if not form.data.get("pick_dataset"):
            return None
        return picker.shown(form.user, form.data)

    @cached_property
    def _restored_picks(self) -> dict[str, object] | None:
        """An edited flow's picks, unless a template attribute input shows one of their keys."""
        form = self.form
        if not form.editing or not form.instance.source:
            return None
        if picker.PICKED_KEYS & set(form.template_attributes().names):
            return None
        return picker.restored(form.user, form.instance.source, form.stored)

    @property
    def destination_table_fields(self) -> list[Any]:
        """A table field for each database destination the owner may write to."""
        names = [destination_table_field(node.name) for node in self.form.nodes]
        return [self.form[name] for name in names if name in self.form.fields]

    @property
    def destination_modes_chosen(self) -> bool:
        """Whether one is chosen or refused (their group is shown open then)."""
        return any(field.errors or field.value() for field in self.destination_mode_fields)

    def _posted_attributes(self) -> dict[str, str]:
        form = self.form
        return AttributesWidget().value_from_datadict(form.data, None, "attributes") if form.is_bound else {}

    def attribute_fields(self) -> list[dict[str, Any]]:
        """One input per template attribute: value posted, else the flow's
        own (editing), else the template's suggested default (new input).
        Encrypted attributes are password inputs that never carry a value."""
        form = self.form
        stored = form.stored
        posted = self._posted_attributes()
        in_rows = {row.key.strip() for row in form.rows("properties")}
        fields = []
        for attribute in form.template_attributes().attributes:
            name = attribute.name
            if attribute.encrypted:
                value = ""
            elif name in posted:
                value = posted[name]
            elif name in in_rows:
                value = ""
            elif not form.is_bound and form.editing:
                value = stored.get(name, "")
            else:
                value = attribute.default
            input_id = attribute_input_id(name)
            spec = spec_for(name)
            fields.append(
                {
                    # The property schema's word on the key, when the template says nothing.
                    "schema_help": schema_help(spec) if spec and not attribute.description else "",
                    "choices": list(spec.choices) if spec else [],
                    "attribute": attribute,
                    "input_name": f"{ATTRIBUTE_INPUT}{name}",
                    "id": input_id,
                    "help_id": f"{input_id}_helptext",
                    "errors_id": f"{input_id}_errors",
                    "value": value,
                    "stored_secret": attribute.encrypted and looks_encrypted(stored.get(name)),
                    "in_rows": name in in_rows,
                    "errors": form.attribute_errors.get(name, []),
                }
            )
        return fields

    def property_rows(self) -> list[Row]:
        form = self.form
        if form.is_bound:
            rows = form.rows("properties")
        else:
            shown = {*form.template_attributes().names, WRAPPED_KEY_PROPERTY, WRITE_MODE_KEY, PRIMARY_KEY}
            shown |= {MAX_COUNT, MAX_FRACTION}  # their fields
            if self._restored_picks:  # the picker shows them
                shown |= picker.PICKED_KEYS
            shown |= {scoped.scoped_key(WRITE_MODE_KEY, node.name) for node in form.nodes}  # their selects
            shown |= {
                scoped.scoped_key(TABLE_KEY, n.name) for n in form.nodes if n.kind == "jdbc"
            }  # their inputs
            rows = [  # by key: the database (jsonb) keeps no order
                Row(key, value)
                for key, value in sorted(form.stored.items())
                if key not in shown and not looks_encrypted(value)
            ]
        return [*rows, *(Row() for _ in range(BLANK_ROWS))]

    def secret_rows(self) -> list[Row]:
        """Never carries a value: stored secrets show as 'stored', typed ones
        are not sent back to the page."""
        form = self.form
        if form.is_bound:
            rows = [Row(row.key, "", row.original) for row in form.rows("secrets")]
        else:
            shown = set(form.template_attributes().encrypted_names)
            rows = [
                Row(key, "", key)
                for key, value in sorted(form.stored.items())
                if looks_encrypted(value) and key not in shown
            ]
        return [*rows, *(Row() for _ in range(1 if rows else BLANK_ROWS))]

    def typed_secrets(self) -> bool:
        """Whether secret values were typed (and so must be typed again after an error)."""
        encrypted = self.form.template_attributes().encrypted_names
        posted = self._posted_attributes()
        return any(row.value for row in self.form.rows("secrets")) or any(
            posted.get(name) for name in encrypted
        )

    def has_customer_key(self) -> bool:
        user = self.form.user
        return user is not None and secrets.customer_key_for(user, self.form.stored) is not None

    @cached_property
    def destination_values(self) -> list[str]:
        form = self.form
        if form.is_bound:
            return form.posted("destinations")
        return list(form.instance.destinations)

    @cached_property
    def unknown_destinations(self) -> list[str]:
        """Ticked destinations that are not data nodes (any more): kept ticked."""
        names = {node.name for node in self.form.nodes}
        return [name for name in self.destination_values if name not in names]

    def errors_for(self, name: str) -> list[str]:
        """Errors of a field, or of one template attribute (`attr:<name>`)."""
        if name.startswith(ATTRIBUTE_INPUT):
            return self.form.attribute_errors.get(name[len(ATTRIBUTE_INPUT) :], [])
        return [str(message) for message in self.form.errors.get(name, [])]

    def error_summary(self) -> list[tuple[str, str, str]]:
        """(input id, label, message) for every problem, for the list at the top."""
        form = self.form
        items = [("", "", str(error)) for error in form.non_field_errors()]
        for name, field in form.fields.items():
            if name == "attributes":
                for attribute_name, messages in form.attribute_errors.items():
                    items.extend((attribute_input_id(attribute_name), attribute_name, m) for m in messages)
                continue
            target = f"field-{name}" if name in GROUPS else f"id_{name}"
            items.extend((target, str(field.label), str(message)) for message in form.errors.get(name, []))
        return items

    def check(self) -> CompiledFlow | None:
        """A live part's check of the unsaved flow (nothing is saved, secrets are not encrypted):
        the form's own rules, then the save's (flows.services.validate_flow) with their errors
        placed by field. Returns what the save would store (COMPILED or PENDING), typed secrets
        shown by their placeholder, or None for a flow the save refuses."""
        form = self.form
        valid = form.is_valid()
        if form.user is None:  # no owner (the topology's preview): nothing to check as
            return None
        flow = form.instance
        if not flow.owner_id:
            flow.owner = form.user
        try:
            compiled = services.validate_flow(flow, loader=form.template_loader).compiled
        except ValidationError as error:
            form.add_model_errors(error)
            return None
        if not valid:
            return None
        typed = {k: v for k, v in form.merged_properties.items() if v == NOT_YET_ENCRYPTED}
        for job in compiled.jobs if typed else ():
            job.properties.update(typed)
        return compiled
