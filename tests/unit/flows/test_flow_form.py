"""People creating and editing flows through the form (server-rendered HTML,
Django test client): choices offered, mistakes reported by field, values
kept, nothing half-saved."""

from __future__ import annotations

import pytest

from portal.flows import services
from portal.flows.models import FlowConfig
from portal.templatepacks import services as packs
from portal.topology import services as topology
from tests.builders.flows import JDBC, new_flow, without_template
from tests.builders.forms import as_post, read_form, submit_as_rendered
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db


# --- choices ------------------------------------------------------------------


def test_source_and_destination_choices_list_the_data_nodes(browser, topology_nodes):
    html = browser.get("/flows/new/").content.decode()
    # Source: a select grouped by kind, each option with its description.
    assert '<optgroup label="JDBC database">' in html
    assert '<option value="pg-sales">pg-sales — Sales orders in PostgreSQL</option>' in html
    assert '<option value="lake">lake — Parquet lake on the shared disk</option>' in html
    # Destinations: one labelled checkbox per node, with its kind and description.
    for name, kind, description in (
        ("pg-sales", "jdbc", "Sales orders in PostgreSQL"),
        ("lake", "files", "Parquet lake on the shared disk"),
        ("archive", "files", "Cold archive"),
    ):
        assert f'name="destinations" value="{name}" id="id_destination-{name}"' in html
        assert f'<label for="id_destination-{name}"><span class="node-name">{name}</span>' in html
        assert f">{kind}</span>" in html
        assert f'id="id_destination-{name}_description">{description}</small>' in html


def test_an_empty_topology_says_so(browser):
    html = browser.get("/flows/new/").content.decode()
    assert "The topology has no data nodes yet" in html


def test_only_packs_the_user_can_read_are_offered(browser, owner, topology_nodes, sales_pack):
    stranger = UserFactory(username="sam")
    make_pack(stranger, name="private-pack", templates={"secret/job.template": "a = 1\n"})
    shared = make_pack(
        stranger, name="shared-pack", templates={"shared/job.template": "a = 1\n"}, readers=[owner]
    )
    html = browser.get("/flows/new/").content.decode()
    assert '<optgroup label="sales-pack">' in html
    assert f'<optgroup label="{shared.name}">' in html
    assert '<option value="pack://shared-pack/shared/job.template">shared/job.template</option>' in html
    assert "private-pack" not in html and "secret/job.template" not in html
    # Posting it anyway is refused, as the API refuses it, and saves nothing.
    response = browser.post("/flows/new/", new_flow(template_uris="pack://private-pack/secret/job.template"))
    assert response.status_code == 400
    assert "does not exist or you cannot read it" in response.content.decode()
    assert not FlowConfig.objects.exists()


# --- creating -------------------------------------------------------------------


def test_creating_a_flow_with_a_mistake_then_fixing_it(browser, owner, topology_nodes, sales_pack):
    mistake = browser.post("/flows/new/", new_flow(schedule="61 * * * *", **{"prop-1-value": "orphan"}))
    assert mistake.status_code == 400
    html = mistake.content.decode()
    assert "minute 61 is outside 0-59" in html
    assert "A property has a value but no key" in html
    assert html.count("minute 61 is outside 0-59") == 2  # by the field and in the summary, once each
    assert not FlowConfig.objects.exists()
    # What was typed is still there.
    fields = dict(read_form(html).fields)
    assert fields["flow_name"] == "orders" and fields["attr:source.jdbc.tables"] == "orders"
    assert fields["prop-0-key"] == "extract.delta.fields"

    fixed = browser.post("/flows/new/", new_flow())
    assert fixed.status_code == 302
    assert fixed["Location"] == "/flows/sales/orders/"
    flow = FlowConfig.objects.get()
    assert (flow.owner, flow.source, flow.destinations) == (owner, "pg-sales", ["lake", "archive"])
    assert flow.template_uris == JDBC and flow.schedule == "*/10 * * * *" and flow.run_immediately
    assert flow.properties == {
        "source.jdbc.schema": "jdbc:postgresql://db/sales",
        "source.jdbc.tables": "orders",
        "extract.delta.fields": "updated_at",
    }
    assert flow.compilation_status == "COMPILED", flow.compilation_message


def test_a_missing_required_template_attribute_is_reported_by_its_field(browser, topology_nodes, sales_pack):
    response = browser.post("/flows/new/", new_flow(**{"attr:source.jdbc.tables": ""}))
    assert response.status_code == 400
    html = response.content.decode()
    assert (
        '<div class="field-errors" id="id_attr-source-jdbc-tables_errors" aria-live="polite">'
        '<p class="error">source.jdbc.tables is required by the chosen template.</p>'
    ) in html
    assert "source.jdbc.schema is required" not in html
    assert not FlowConfig.objects.exists()
    # Given as a property row instead, it counts.
    moved = new_flow(
        **{"attr:source.jdbc.tables": "", "prop-1-key": "source.jdbc.tables", "prop-1-value": "x"}
    )
    assert browser.post("/flows/new/", moved).status_code == 302


def test_a_taken_key_is_reported_on_the_name(browser, owner, topology_nodes, sales_pack):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    response = browser.post("/flows/new/", new_flow())
    assert response.status_code == 400
    assert "Flow sales/orders already exists." in response.content.decode()
    assert FlowConfig.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"flow_group": "no spaces"}, "Use 1-128 letters, digits"),
        ({"destinations": ["lake", "lake"]}, "A destination is listed twice."),
        ({"template_uris": "not-a-uri"}, "is not a template URI"),
        (
            {"prop-1-key": "extract.delta.fields", "prop-1-value": "x"},
            "&#x27;extract.delta.fields&#x27; is given twice.",
        ),
        (
            {"properties_text": "extract.delta.fields=y"},
            "is set twice: in the properties and in the pasted lines",
        ),
        ({"properties_text": "no equals sign"}, "Line 1: write key=value"),
        ({"prop-7-key": "k" * 300, "prop-7-value": "v"}, "is longer than 256 characters"),
        ({"prop-1-key": "k", "prop-1-value": "ENC(nope)"}, "is not a valid ENC(...) value"),
        ({"schedule": "0 0 * * * ? 3000"}, "Quartz year field"),
    ],
)
def test_bad_input_gets_a_field_error_never_a_500(browser, topology_nodes, sales_pack, changes, message):
    response = browser.post("/flows/new/", new_flow(**changes))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not FlowConfig.objects.exists()


def test_a_broken_post_is_a_400(browser, topology_nodes):
    response = browser.post("/flows/new/", {"prop-99999-key": "x", "destinations": "", "attr:": "y"})
    assert response.status_code == 400
    assert not FlowConfig.objects.exists()


# --- key/value rows ------------------------------------------------------------


def test_key_value_rows_round_trip(browser, owner, topology_nodes):
    rows = {
        "prop-0-key": "source.jdbc.tables",
        "prop-0-value": "orders, customers",
        "prop-3-key": "writer.output.format",  # scripts number new rows; gaps are fine
        "prop-3-value": "parquet",
        "prop-4-key": "empty.value",
        "prop-4-value": "",
        "properties_text": "# pasted\njob.commit.policy=full\nextract.is.full=true",
    }
    created = browser.post("/flows/new/", without_template(**rows))
    assert created.status_code == 302, created.content.decode()
    expected = {
        "source.jdbc.tables": "orders, customers",
        "writer.output.format": "parquet",
        "empty.value": "",
        "job.commit.policy": "full",
        "extract.is.full": "true",
    }
    assert FlowConfig.objects.get().properties == expected

    page = browser.get("/flows/sales/orders/edit/")
    fields = read_form(page.content).fields
    pairs = dict(fields)
    shown = [(pairs[f"prop-{n}-key"], pairs[f"prop-{n}-value"]) for n in range(5)]
    assert shown == sorted(expected.items())  # by key
    assert pairs["prop-5-key"] == pairs["prop-6-key"] == ""  # blank rows to add more without scripts
    assert submit_as_rendered(browser, "/flows/sales/orders/edit/").status_code == 302
    assert FlowConfig.objects.get().properties == expected
    # Emptying a row removes that property.
    removed = submit_as_rendered(
        browser, "/flows/sales/orders/edit/", **{"prop-4-key": "", "prop-4-value": ""}
    )
    assert removed.status_code == 302
    assert "writer.output.format" not in FlowConfig.objects.get().properties


# --- editing --------------------------------------------------------------------


def test_edit_shows_the_stored_values_and_saving_unchanged_keeps_them(
    browser, owner, topology_nodes, sales_pack
):
    assert browser.post("/flows/new/", new_flow()).status_code == 302
    before = FlowConfig.objects.values().get()

    page = browser.get("/flows/sales/orders/edit/")
    assert page.status_code == 200
    html = page.content.decode()
    fields = read_form(html).fields
    pairs = dict(fields)
    assert (pairs["flow_group"], pairs["flow_name"], pairs["source"]) == ("sales", "orders", "pg-sales")
    assert sorted(v for k, v in fields if k == "destinations") == ["archive", "lake"]
    assert pairs["template_uris"] == JDBC
    assert pairs["attr:source.jdbc.tables"] == "orders" and pairs["schedule"] == "*/10 * * * *"
    assert pairs["run_immediately"] == "on"
    assert (pairs["prop-0-key"], pairs["prop-0-value"]) == ("extract.delta.fields", "updated_at")
    assert "source.jdbc.tables" not in [v for k, v in fields if k.endswith("-key")]  # an attribute, not a row
    assert 'readonly aria-describedby="id_flow_name_helptext' in html or "readonly" in html
    assert "Runs every 10 minutes." in html

    saved = submit_as_rendered(browser, "/flows/sales/orders/edit/", description="changed")
    assert saved.status_code == 302
    after = FlowConfig.objects.values().get()
    changed = {k for k in before if before[k] != after[k]}
    # "Run immediately" is still ticked, so the save ran the flow again (as Gobblin's
    # runImmediately on an update does): only the run summary moves besides the edit.
    assert changed - {"last_run_id", "last_run_status"} == {"description", "updated"}
    assert after["last_run_id"] > before["last_run_id"]


def test_the_key_cannot_be_changed_by_editing(browser, owner, topology_nodes):
    FlowConfigFactory(
        flow_group="sales",
        flow_name="orders",
        owner=owner,
        source="pg-sales",
        properties={"source.jdbc.tables": "orders", "extract.is.full": "true"},
    )
    response = submit_as_rendered(browser, "/flows/sales/orders/edit/", flow_name="renamed", flow_group="x")
    assert response.status_code == 302
    assert list(FlowConfig.objects.values_list("flow_group", "flow_name")) == [("sales", "orders")]


def test_edit_keeps_values_the_form_does_not_offer(browser, owner, topology_nodes, sales_pack):
    """A flow made through the API with two templates, one an FS:/// URI, whose source and one
    destination later left the topology. The edit form keeps all of them, and saving says
    what no longer exists instead of dropping it."""
    legacy = topology.create_data_node(
        {"name": "pg-legacy", "kind": "jdbc", "properties": {"url": "jdbc:postgresql://db.example/legacy"}}
    )
    gone = topology.create_data_node({"name": "gone", "kind": "files", "properties": {"path": "gone"}})
    properties = {"source.jdbc.schema": "u", "source.jdbc.tables": "t", "extract.is.full": "true"}
    flow = services.create_flow(
        owner=owner,
        data={
            "flow_group": "api",
            "flow_name": "made",
            "source": "pg-legacy",
            "destinations": ["lake", "gone"],
            "template_uris": f"FS:///base.template,{JDBC}",
            "properties": properties,
        },
    )
    topology.delete_data_node(legacy)
    topology.delete_data_node(gone)
    html = browser.get("/flows/api/made/edit/").content.decode()
    assert '<option value="pg-legacy" selected>pg-legacy (not a data node)</option>' in html
    assert 'value="gone" id="id_destination-gone" checked' in html
    saved = submit_as_rendered(browser, "/flows/api/made/edit/")
    assert saved.status_code == 400
    assert "&#x27;pg-legacy&#x27; is not a data node." in saved.content.decode()
    assert "&#x27;gone&#x27; is not a data node." in saved.content.decode()
    page = read_form(saved.content.decode())
    assert dict(page.fields)["source"] == "pg-legacy" and ("destinations", "gone") in page.fields
    flow.refresh_from_db()
    assert (flow.source, flow.destinations) == ("pg-legacy", ["lake", "gone"])
    assert flow.template_uris == f"FS:///base.template,{JDBC}"
    assert flow.properties == properties


def test_templates_the_owner_can_no_longer_read_are_reported_on_edit(browser, owner, topology_nodes):
    other = UserFactory(username="pat")
    pack = make_pack(other, name="team-pack", templates={"base.template": "a = 1\n"}, readers=[owner])
    services.create_flow(
        owner=owner,
        data={
            "flow_group": "g",
            "flow_name": "f",
            "source": "pg-sales",
            "destinations": ["lake"],
            "template_uris": "pack://team-pack/base.template",
            "properties": {"source.jdbc.tables": "t", "extract.is.full": "true"},
        },
    )
    packs.set_acl(pack, user=other, entries=[{"role": "owner", "user": other.username}])
    html = browser.get("/flows/g/f/edit/").content.decode()
    assert '<option value="pack://team-pack/base.template" selected>' in html  # kept, not lost
    response = submit_as_rendered(browser, "/flows/g/f/edit/")
    assert response.status_code == 400
    assert "does not exist or you cannot read it" in response.content.decode()


def test_staff_edit_someone_elses_flow_with_the_owners_packs(
    client, owner, staff, topology_nodes, sales_pack
):
    assert client.force_login(owner) is None
    assert client.post("/flows/new/", new_flow()).status_code == 302
    client.force_login(staff)
    assert submit_as_rendered(client, "/flows/sales/orders/edit/", description="by staff").status_code == 302
    flow = FlowConfig.objects.get()
    assert (flow.owner, flow.description) == (owner, "by staff")


@pytest.mark.parametrize("method", ["get", "post"])
def test_outsiders_cannot_reach_the_edit_form_or_its_parts(client, owner, outsider, method):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    client.force_login(outsider)
    for url in ("/flows/sales/orders/edit/", "/flows/sales/orders/edit/?part=compile"):
        assert getattr(client, method)(url).status_code == 403
    assert getattr(client, method)("/flows/sales/nope/edit/").status_code == 404
    client.logout()
    assert getattr(client, method)("/flows/new/?part=schedule").status_code == 302  # to the login page


# --- secret properties ---------------------------------------------------------


@pytest.fixture
def customer_key(owner, settings, tmp_path):
    from portal.crypto.master import create_ring_file
    from portal.keys import services as keys

    path = tmp_path / "master-key"
    create_ring_file(path)
    settings.FLOWPORT_MASTER_KEY_FILE = str(path)
    settings.FLOWPORT_MASTER_KEY = ""
    return keys.wrap_customer_key(user=owner, generate=True, label="main").customer_key


SECRET = "hunter2 ☃"


def test_secrets_are_encrypted_with_the_owners_key_and_never_shown(
    browser, owner, topology_nodes, customer_key
):
    from portal.keys.services import decrypt_properties

    form = without_template(**{"secret-0-key": "source.jdbc.password", "secret-0-value": SECRET})
    assert browser.post("/flows/new/", form).status_code == 302
    flow = FlowConfig.objects.get()
    stored = flow.properties["source.jdbc.password"]
    assert stored.startswith("ENC(") and SECRET not in str(flow.properties)
    assert flow.properties["encrypt.wrapped.key"] == customer_key.wrapped_key
    assert decrypt_properties(flow.properties)["source.jdbc.password"] == SECRET

    detail = browser.get("/flows/sales/orders/").content.decode()
    assert stored not in detail and SECRET not in detail
    assert "(secret, not shown)" in detail

    edit = browser.get("/flows/sales/orders/edit/").content.decode()
    assert stored not in edit and SECRET not in edit
    fields = dict(read_form(edit).fields)
    assert fields["secret-0-key"] == "source.jdbc.password"
    assert fields["secret-0-value"] == "" and fields["secret-0-original"] == "source.jdbc.password"
    assert 'type="password" name="secret-0-value"' in edit
    assert "encrypt.wrapped.key" not in [v for k, v in read_form(edit).fields if k.endswith("-key")]

    # Saved unchanged: the ciphertext is kept as it was.
    assert submit_as_rendered(browser, "/flows/sales/orders/edit/").status_code == 302
    assert FlowConfig.objects.get().properties == flow.properties
    # A new value replaces it; a renamed row keeps the stored value under the new key.
    changed = submit_as_rendered(
        browser,
        "/flows/sales/orders/edit/",
        **{"secret-0-key": "source.jdbc.pass", "secret-1-key": "api.token"},
    )
    assert changed.status_code == 400
    assert "Type the value of secret &#x27;api.token&#x27;." in changed.content.decode()
    changed = submit_as_rendered(
        browser,
        "/flows/sales/orders/edit/",
        **{"secret-0-key": "source.jdbc.pass", "secret-1-key": "api.token", "secret-1-value": "t0k"},
    )
    assert changed.status_code == 302
    properties = decrypt_properties(FlowConfig.objects.get().properties)
    assert (properties["source.jdbc.pass"], properties["api.token"]) == (SECRET, "t0k")
    assert "source.jdbc.password" not in properties


def test_secrets_need_a_customer_key(browser, topology_nodes):
    form = without_template(**{"secret-0-key": "source.jdbc.password", "secret-0-value": SECRET})
    response = browser.post("/flows/new/", form)
    assert response.status_code == 400
    html = response.content.decode()
    assert "secret properties need a customer key; create one under Keys" in html
    assert "Secret values are never sent back to the page: type them again." in html
    assert SECRET not in html
    assert not FlowConfig.objects.exists()
    assert "You have no customer key yet" in browser.get("/flows/new/").content.decode()


def test_template_attributes_declared_encrypted_are_secret_inputs(
    browser, owner, topology_nodes, customer_key
):
    template = (
        'gobblin.template.required_attributes = "source.jdbc.password"\n'
        'gobblin.template.encrypted_attributes = "source.jdbc.password"\n'
    )
    make_pack(owner, name="enc-pack", templates={"job.template": template})
    uri = "pack://enc-pack/job.template"
    fragment = browser.post(
        "/flows/new/?part=attributes", {"template_uris": uri}, headers={"HX-Request": "true"}
    )
    assert 'type="password" name="attr:source.jdbc.password"' in fragment.content.decode()
    form = new_flow(template_uris=uri, **{"attr:source.jdbc.password": SECRET})
    assert browser.post("/flows/new/", form).status_code == 302
    stored = FlowConfig.objects.get().properties
    assert stored["source.jdbc.password"].startswith("ENC(") and SECRET not in str(stored)
    # Editing without typing it again keeps it.
    assert submit_as_rendered(browser, "/flows/sales/orders/edit/").status_code == 302
    assert FlowConfig.objects.get().properties == stored


def test_the_old_field_names_still_work(browser, owner, topology_nodes):
    """destinations_text and properties_text, as scripts and the old form post them."""
    form = {
        "flow_group": "g",
        "flow_name": "n",
        "source": "pg-sales",
        "destinations_text": "lake, archive",
        "properties_text": "a=b\nsource.jdbc.tables=orders\nextract.is.full=true",
    }
    assert browser.post("/flows/new/", form).status_code == 302
    flow = FlowConfig.objects.get()
    assert flow.destinations == ["lake", "archive"]
    assert flow.properties == {"a": "b", "source.jdbc.tables": "orders", "extract.is.full": "true"}


def test_post_data_round_trips_through_as_post():
    assert as_post([("a", "1"), ("b", "2"), ("b", "3"), ("csrfmiddlewaretoken", "x")], c="4") == {
        "a": "1",
        "b": ["2", "3"],
        "c": "4",
    }
