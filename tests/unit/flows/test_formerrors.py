"""The flow form's errors land where a person typed (flows.formerrors): a taken key on the flow's
name, a missing template attribute and a bad value typed in an attribute's box at that box, a
message the model repeats said once."""

from __future__ import annotations

import pytest
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from portal.flows import services
from portal.flows.forms import FlowConfigForm
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db

JDBC = "pack://sales-pack/ingest/jdbc.template"


def posted(**changes: str) -> dict[str, str]:
    data = {
        "flow_group": "sales",
        "flow_name": "orders",
        "source": "pg-sales",
        "destinations": "lake",
        "template_uris": JDBC,
        "attr:source.jdbc.schema": "jdbc:postgresql://db/sales",
        "attr:source.jdbc.tables": "orders",
        "schedule": "*/10 * * * *",
    }
    return {**data, **changes}


@pytest.fixture
def form_of(owner, topology_nodes, sales_pack):
    def make(**changes: str) -> FlowConfigForm:
        form = FlowConfigForm(posted(**changes), user=owner)
        form.is_valid()
        return form

    return make


def test_a_taken_key_is_said_once_on_the_flows_name(owner, form_of):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    form = form_of()
    assert form.errors["flow_name"] == ["Flow sales/orders already exists."]
    assert NON_FIELD_ERRORS not in form.errors


def test_a_missing_attribute_is_shown_at_its_own_box(form_of):
    form = form_of(**{"attr:source.jdbc.tables": ""})
    assert form.is_valid()  # the form has no say on attributes: the service finds it missing
    missing = ValidationError(
        {
            "properties": [
                ValidationError(
                    "source.jdbc.tables is required",
                    code=services.REQUIRED_ATTRIBUTE,
                    params={"name": "source.jdbc.tables"},
                )
            ]
        }
    )
    form.add_model_errors(missing)
    assert form.attribute_errors == {"source.jdbc.tables": ["source.jdbc.tables is required"]}
    assert form.errors["attributes"] == ["source.jdbc.tables is required"]
    assert "properties" not in form.errors


def test_a_bad_value_typed_in_an_attribute_box_is_shown_there(form_of):
    form = form_of(**{"attr:source.jdbc.tables": "orders;drop"})
    problem = "'source.jdbc.tables' names no table: orders;drop"
    form.add_model_errors(ValidationError({"properties": [problem], "schedule": ["Not a cron expression."]}))
    assert form.attribute_errors["source.jdbc.tables"] == [problem]
    assert form.errors["attributes"] == [problem]
    assert form.errors["schedule"] == ["Not a cron expression."]


def test_a_property_problem_after_an_attribute_one_stays_with_the_properties(form_of):
    form = form_of(**{"attr:source.jdbc.tables": ""})
    required = ValidationError(
        "source.jdbc.tables is required",
        code=services.REQUIRED_ATTRIBUTE,
        params={"name": "source.jdbc.tables"},
    )
    other = "'extract.delta.fields' is not a known key."
    form.add_model_errors(ValidationError({"properties": [required, other]}))
    assert form.errors["attributes"] == ["source.jdbc.tables is required"]
    assert form.errors["properties"] == [other]


def test_a_form_wide_message_is_said_once(form_of):
    form = form_of()
    for _ in range(2):
        form.add_model_errors(ValidationError("The compiler found no path to lake."))
    assert form.errors[NON_FIELD_ERRORS] == ["The compiler found no path to lake."]
