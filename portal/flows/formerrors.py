"""Where the flow form shows each error. The model's validators and flows.services speak of the
flow's fields and its merged properties; a person typed into inputs: a template attribute's own
box, the flow's name for a key already taken. These functions move each message to the input it
is about and say it once, so the form (flows.forms) only collects input and the page
(flows.formpage) only shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.utils import ErrorList

from portal.flows import services
from portal.flows.services import FlowAlreadyExists

if TYPE_CHECKING:
    from portal.flows.forms import FlowConfigForm


def add_once(form: FlowConfigForm, field: str, message: str) -> None:
    """`message` beside `field`, unless it is shown there already."""
    if message not in form.errors.get(field, []):
        form.errors.setdefault(field, form.error_class(renderer=form.renderer)).append(message)
        form.cleaned_data.pop(field, None)


def after_clean(form: FlowConfigForm) -> None:
    """After Django's validation of a bound form: the model's errors said once, by the input."""
    _tidy_model_errors(form)
    _move_attribute_errors(form)


def place(form: FlowConfigForm, error: ValidationError) -> None:
    """Errors raised by flows.services.validate_flow next to the field they name; a required
    template attribute beside its input. A message already shown is not repeated."""
    if not hasattr(error, "error_dict"):
        for message in error.messages:
            add_once(form, NON_FIELD_ERRORS, message)
        return
    shown = set(form.template_attributes().names)
    for field, items in error.error_dict.items():
        for item in items:
            message = str(item.message % item.params if item.params else item.message)
            name = (item.params or {}).get("name")
            target = field
            if item.code == services.REQUIRED_ATTRIBUTE and isinstance(name, str) and name in shown:
                form.attribute_errors.setdefault(name, []).append(message)
                target = "attributes"
            elif field == "properties" and (typed := _typed_attribute_named(form, message)):
                form.attribute_errors.setdefault(typed, []).append(message)
                target = "attributes"
            add_once(form, target if target in form.fields else NON_FIELD_ERRORS, message)


def _tidy_model_errors(form: FlowConfigForm) -> None:
    """model.clean() repeats field errors as form-wide ones, and the key's unique constraint
    speaks of "Flow config": say it once, by the name."""
    general = form.errors.get(NON_FIELD_ERRORS)
    if not general:
        return
    by_field = {
        message for name, errors in form.errors.items() if name != NON_FIELD_ERRORS for message in errors
    }
    kept = ErrorList(error_class="nonfield", renderer=form.renderer)
    for error in general.as_data():
        for message in error.messages:
            if error.code == "unique_together" or "already exists" in message:
                taken = FlowAlreadyExists(form.data.get("flow_group", ""), form.data.get("flow_name", ""))
                add_once(form, "flow_name", str(taken))
            elif message not in by_field:
                kept.append(message)
    if kept:
        form.errors[NON_FIELD_ERRORS] = kept
    else:
        del form.errors[NON_FIELD_ERRORS]


def _typed_attribute_named(form: FlowConfigForm, message: str) -> str | None:
    """The template attribute a property problem is about, when its value was typed in the
    attribute's own input (the pipeline's messages quote the key: `'source.files.format'`)."""
    typed = (form.cleaned_data or {}).get("attributes") or {}
    return next((name for name, value in typed.items() if value and f"'{name}'" in message), None)


def _move_attribute_errors(form: FlowConfigForm) -> None:
    """The model's property validators speak of the merged properties; a problem with a value
    typed in a template attribute's input is shown at that input."""
    messages = form.errors.get("properties")
    if not messages:
        return
    kept = form.error_class(renderer=form.renderer)
    for message in messages:
        typed = _typed_attribute_named(form, str(message))
        if typed:
            form.attribute_errors.setdefault(typed, []).append(str(message))
            add_once(form, "attributes", str(message))
        else:
            kept.append(message)
    if kept:
        form.errors["properties"] = kept
    else:
        del form.errors["properties"]
