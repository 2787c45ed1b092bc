"""One validation for every way a flow is saved (flows.services.validate_flow): what cannot run
is refused before anything is written, with the same message from the API, the form and the
worker."""

from __future__ import annotations

import pytest

from portal.flows.models import CompiledJobDag, FlowConfig
from portal.flows.signals import flow_catalog_changed
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties
from tests.builders.flows import DEMO_TEMPLATE, readme_body
from tests.unit.templatepacks.factories import make_pack
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

XML_REFUSAL = "unknown value 'xml' in 'source.files.format' (supported: avro, csv, json, jsonl, orc, parquet)"


@pytest.fixture(autouse=True)
def demo(owner):
    """The README's demo: landing → lake → archive, and the pack whose template requires the format."""
    nodes("landing", "lake", "archive")
    executor("ingest", "landing>lake")
    executor("replicate", "lake>archive")
    make_pack(owner, "demo-pack", {"ingest/files.template": DEMO_TEMPLATE})


@pytest.fixture
def heard():
    """Every catalog event: none may be sent for a refused save."""
    events: list[str] = []

    def listener(sender, action, flow, **kwargs):
        events.append(action)

    flow_catalog_changed.connect(listener)
    yield events
    flow_catalog_changed.disconnect(listener)


def assert_refused(response, expected: dict, heard: list[str]) -> None:
    assert response.status_code == 400, response.content
    assert response.json() == expected
    assert not FlowConfig.objects.exists() and not CompiledJobDag.objects.exists()
    assert heard == []


def test_the_readme_example_is_created_and_compiles(api):
    response = api.post("/api/flowconfigs", readme_body(), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["compilation"]["status"] == "COMPILED"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (  # the README promises this one: leave the attribute out and the answer names it
            {"properties": {}},
            {"properties": ["source.files.format is required by the chosen template."]},
        ),
        ({"destinations": []}, {"destinations": ["Choose at least one destination data node."]}),
        ({"destinations": ["nowhere"]}, {"destinations": ["'nowhere' is not a data node."]}),
        ({"source": "nowhere"}, {"source": ["'nowhere' is not a data node."]}),
        ({"source": ""}, {"source": ["Choose the data node the data is read from."]}),
        ({"properties": {"source.files.format": "xml"}}, {"properties": [XML_REFUSAL]}),
        (
            {"properties": {"source.files.format": "csv", "fork.branches": "two"}},
            {"properties": ["property 'fork.branches' must be an integer, got 'two'"]},
        ),
        (
            {"templateUris": "pack://demo-pack/nope.template"},
            {
                "templateUris": [
                    "pack://demo-pack/nope.template: no template nope.template in pack demo-pack."
                ]
            },
        ),
    ],
)
def test_what_cannot_run_is_refused_naming_the_field(api, heard, changes, expected):
    response = api.post("/api/flowconfigs", readme_body(**changes), format="json")
    if "templateUris" in expected:  # the template's own wording; the field is what matters here
        assert response.status_code == 400 and list(response.json()) == ["templateUris"]
        assert not FlowConfig.objects.exists() and heard == []
        return
    assert_refused(response, expected, heard)


def test_a_flow_without_a_template_is_judged_by_the_property_schema(api, heard):
    """The files source needs its format whatever supplies it: a template or the flow."""
    body = readme_body(templateUris="", properties={})
    assert_refused(
        api.post("/api/flowconfigs", body, format="json"),
        {"properties": ["missing required property 'source.files.format'"]},
        heard,
    )


def test_a_clear_secret_is_refused_before_anything_is_written(api, heard):
    """The keys app's check runs in validate_flow, not in a listener after the compile was written."""
    body = readme_body(
        properties={"source.files.format": "csv", "db.password": "hunter2"}, runImmediately=True
    )
    response = api.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400
    assert "'db.password' names a secret" in response.json()["properties"][0]
    assert "hunter2" not in response.content.decode()
    assert not FlowConfig.objects.exists() and heard == []


def test_an_update_is_validated_like_a_create(api, heard):
    assert api.post("/api/flowconfigs", readme_body(), format="json").status_code == 201
    heard.clear()
    url = "/api/flowconfigs/mygroup/myflow1"
    response = api.patch(url, {"properties": {"source.files.format": "xml"}}, format="json")
    assert response.status_code == 400 and response.json() == {"properties": [XML_REFUSAL]}
    assert FlowConfig.objects.get().properties == {"source.files.format": "csv"} and heard == []


def test_the_worker_refuses_the_value_with_the_same_message():
    with pytest.raises(ConfigError) as refused:
        Properties({"source.files.format": "xml"}).get_choice("source.files.format")
    assert str(refused.value) == XML_REFUSAL


def test_a_pending_flow_is_accepted_and_waits_for_a_path(api):
    """No executor reaches the destination yet: the topology may grow one, so the flow is kept."""
    nodes("island")
    response = api.post("/api/flowconfigs", readme_body(destinations=["island"]), format="json")
    assert response.status_code == 201
    assert response.json()["compilation"]["status"] == "PENDING"


# --- the form: the same messages, by the field -----------------------------------------


def form_data(**changes) -> dict:
    data = {
        "flow_group": "mygroup",
        "flow_name": "myflow1",
        "source": "landing",
        "destinations": ["archive"],
        "template_uris": "pack://demo-pack/ingest/files.template",
        "attr:source.files.format": "csv",
        "schedule": "0 */6 * * *",
    }
    return {k: v for k, v in {**data, **changes}.items() if v is not None}


def test_the_form_refuses_a_flow_with_no_destination_by_its_field(browser, heard):
    response = browser.post("/flows/new/", form_data(destinations=None))
    assert response.status_code == 400
    html = response.content.decode()
    errors = html.split('id="id_destinations_errors"')[1].split("</div>")[0]
    assert "Choose at least one destination data node." in errors
    assert (
        '<a href="#field-destinations">Destinations: Choose at least one destination data node.</a>' in html
    )
    assert not FlowConfig.objects.exists() and heard == []


def test_the_form_puts_a_bad_value_and_a_missing_attribute_where_the_api_does(browser, heard):
    missing = browser.post("/flows/new/", form_data(**{"attr:source.files.format": ""})).content.decode()
    box = missing.split('id="id_attr-source-files-format_errors"')[1].split("</div>")[0]
    assert "source.files.format is required by the chosen template." in box
    bad = browser.post("/flows/new/", form_data(**{"attr:source.files.format": "xml"})).content.decode()
    # Typed in the attribute's input, the bad value is reported there, not under the properties.
    at_attribute = bad.split('id="id_attr-source-files-format_errors"')[1].split("</div>")[0]
    assert XML_REFUSAL.replace("'", "&#x27;") in at_attribute
    assert (
        XML_REFUSAL.replace("'", "&#x27;") not in bad.split('id="id_properties_errors"')[1].split("</div>")[0]
    )
    assert not FlowConfig.objects.exists() and heard == []


def test_the_forms_compile_preview_never_says_compiled_for_a_flow_the_save_refuses(browser):
    headers = {"HX-Request": "true"}
    refused = browser.post(
        "/flows/new/?part=compile", form_data(**{"attr:source.files.format": "xml"}), headers=headers
    ).content.decode()
    assert "badge compiled" not in refused and XML_REFUSAL.replace("'", "&#x27;") in refused
    accepted = browser.post("/flows/new/?part=compile", form_data(), headers=headers).content.decode()
    assert '<span class="badge compiled">compiled</span>' in accepted
    assert not FlowConfig.objects.exists()


def test_the_form_saves_a_runnable_flow_once(browser, heard):
    assert browser.post("/flows/new/", form_data()).status_code == 302
    assert heard == ["add"]
    assert FlowConfig.objects.get().compilation_status == "COMPILED"


def test_an_attribute_the_template_leaves_undescribed_is_explained_by_the_property_schema(browser, owner):
    make_pack(
        owner,
        "bare-pack",
        {"files.template": 'gobblin.template.required_attributes = "source.files.format"\n'},
    )
    headers = {"HX-Request": "true"}
    html = browser.post(
        "/flows/new/?part=attributes", {"template_uris": "pack://bare-pack/files.template"}, headers=headers
    ).content.decode()
    assert "Format of the source files. One of: avro, csv, json, jsonl, orc, parquet." in html
    assert 'list="id_attr-source-files-format_choices"' in html
    assert '<datalist id="id_attr-source-files-format_choices"><option value="avro">' in html
