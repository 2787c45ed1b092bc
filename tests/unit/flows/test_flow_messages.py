"""What the flow form and the API say about a mistake, and where: an impossible schedule is
refused naming its field, a bad value typed in a template attribute is reported at that
attribute, and a misspelt property key is saved with a warning naming the closest known key."""

from __future__ import annotations

from html import unescape

import pytest

from portal.flows.models import FlowConfig
from tests.builders.api import api_client_for
from tests.builders.flows import new_flow
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db

FILES_TEMPLATE = """\
gobblin.template.required_attributes = "source.files.format"
flowport.attribute.source.files.format.default = "csv"
writer.output.format = parquet
"""
FILES = "pack://files-pack/ingest/files.template"


@pytest.fixture
def files_pack(owner):
    return make_pack(owner, "files-pack", {"ingest/files.template": FILES_TEMPLATE})


def files_flow(**changes) -> dict:
    form = {
        "flow_group": "lake",
        "flow_name": "copy",
        "source": "lake",
        "destinations": ["archive"],
        "template_uris": FILES,
        "attr:source.files.format": "csv",
        "schedule": "*/10 * * * *",
        "prop-0-key": "",
        "prop-0-value": "",
    }
    form.update(changes)
    return form


def errors_at(html: str, input_id: str) -> str:
    """The text of the error block tied to an input (`<id>_errors`)."""
    start = html.index(f'id="{input_id}_errors"')
    return unescape(html[start : html.index("</div>", start)])


# --- an impossible schedule ---------------------------------------------------------------------


def test_a_schedule_that_never_fires_is_refused_at_the_schedule_field(browser, topology_nodes, sales_pack):
    response = browser.post("/flows/new/", new_flow(schedule="0 0 31 2 *"))
    assert response.status_code == 400
    html = response.content.decode()
    said = errors_at(html, "id_schedule")
    assert "never fires" in said and "day-of-month" in said and "February" in said
    assert not FlowConfig.objects.exists()
    # February 29th comes every four years: a schedule, not a mistake.
    assert browser.post("/flows/new/", new_flow(schedule="0 0 29 2 *")).status_code == 302


def test_the_api_refuses_a_schedule_that_never_fires_naming_the_field(owner, topology_nodes, sales_pack):
    body = {
        "flowGroup": "sales",
        "flowName": "orders",
        "schedule": "0 0 30 2 *",
        "templateUris": "pack://sales-pack/ingest/jdbc.template",
        "properties": {
            "source.jdbc.tables": "orders",
            "source.jdbc.schema": "public",
            "extract.is.full": "true",
        },
        "source": "pg-sales",
        "destinations": ["lake"],
    }
    response = api_client_for(owner).post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["schedule"]
    assert "never fires" in response.json()["schedule"][0]
    # Gobblin's Quartz form of the same mistake is refused the same way.
    quartz = api_client_for(owner).post(
        "/api/flowconfigs", {**body, "schedule": "0 0 0 31 4 ?"}, format="json"
    )
    assert quartz.status_code == 400 and "April" in quartz.json()["schedule"][0]
    # Gobblin's "never run" schedule names a year on purpose and stays accepted.
    never = api_client_for(owner).post(
        "/api/flowconfigs", {**body, "schedule": "0 0 0 ? 1 1 2050"}, format="json"
    )
    assert never.status_code == 201, never.json()


# --- a template attribute's value ---------------------------------------------------------------


def test_a_bad_value_typed_in_a_template_attribute_is_reported_at_that_attribute(
    browser, topology_nodes, files_pack
):
    response = browser.post("/flows/new/", files_flow(**{"attr:source.files.format": "xml"}))
    assert response.status_code == 400
    html = response.content.decode()
    said = errors_at(html, "id_attr-source-files-format")
    assert "unknown value 'xml'" in said
    assert "unknown value" not in errors_at(html, "id_properties")
    # The summary at the top links to the attribute's input.
    assert 'href="#id_attr-source-files-format"' in html
    # The same value typed as a property row is reported under the properties.
    row = files_flow(
        **{"attr:source.files.format": "", "prop-0-key": "source.files.format", "prop-0-value": "xml"}
    )
    html = browser.post("/flows/new/", row).content.decode()
    assert "unknown value 'xml'" in errors_at(html, "id_properties")


# --- a misspelt property key --------------------------------------------------------------------


def test_a_misspelt_property_key_is_saved_with_a_warning_naming_the_closest_key(
    browser, topology_nodes, files_pack
):
    typo = files_flow(**{"prop-0-key": "source.file.fromat", "prop-0-value": "csv"})
    response = browser.post("/flows/new/", typo, follow=True)
    assert response.status_code == 200
    html = unescape(response.content.decode())
    assert 'class="message warning"' in html
    assert "'source.file.fromat'" in html and "did you mean 'source.files.format'?" in html
    assert FlowConfig.objects.get().properties["source.file.fromat"] == "csv"  # saved as typed
    # A custom key nothing like a known one is saved without a word.
    custom = files_flow(flow_name="custom", **{"prop-0-key": "team.cost.centre", "prop-0-value": "42"})
    html = browser.post("/flows/new/", custom, follow=True).content.decode()
    assert "did you mean" not in html


def test_the_api_answers_a_misspelt_key_with_warnings(owner, topology_nodes, files_pack):
    body = {
        "flowGroup": "lake",
        "flowName": "copy",
        "schedule": "",
        "templateUris": FILES,
        "properties": {"source.files.format": "csv", "job.retry.cont": "2", "team.cost.centre": "42"},
        "source": "lake",
        "destinations": ["archive"],
        "paused": True,
    }
    api = api_client_for(owner)
    response = api.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["warnings"] == [
        "Property 'job.retry.cont' is no key Flowport knows; did you mean 'job.retry.count'? "
        "It was saved as typed (custom keys are allowed)."
    ]
    fixed = api.patch(
        "/api/flowconfigs/lake/copy",
        {"properties": {"source.files.format": "csv", "job.retry.count": "2"}},
        format="json",
    )
    assert fixed.status_code == 200 and fixed.json()["warnings"] == []


def test_a_spark_setting_a_flow_names_is_said_to_be_not_applied(owner, topology_nodes, files_pack):
    """A flow's job runs in its executor's Spark: `flow.spark.conf.*` is kept, and the answer says
    it does nothing and what to ask for instead."""
    body = {
        "flowGroup": "lake",
        "flowName": "tuned",
        "schedule": "",
        "templateUris": FILES,
        "properties": {"source.files.format": "csv", "flow.spark.conf.spark.sql.shuffle.partitions": "8"},
        "source": "lake",
        "destinations": ["archive"],
        "paused": True,
    }
    response = api_client_for(owner).post("/api/flowconfigs", body, format="json")
    assert response.status_code == 201, response.json()
    [warning] = response.json()["warnings"]
    assert warning.startswith("Property 'flow.spark.conf.spark.sql.shuffle.partitions' is not applied")
    assert "'flow.spark.cores'" in warning and "'flow.spark.memory'" in warning
