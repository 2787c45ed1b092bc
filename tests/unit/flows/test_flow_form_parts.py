"""The flow form's live parts (htmx POSTs of the whole form to the form's own
URL with ?part=): schedule preview, template attributes, field errors and the
compile preview. They save nothing and answer 200 with the fragment."""

from __future__ import annotations

import re

import pytest

from portal.flows.models import FlowConfig
from tests.builders.forms import htmx
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db


RUN = re.compile(r'<li><time datetime="([^"]+)">([^<]+)</time></li>')


def runs(html: str) -> list[tuple[str, str]]:
    return RUN.findall(html)


# --- schedule ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "summary"),
    [
        ("*/5 * * * *", "Runs every 5 minutes."),
        ("0 0/5 * * * ?", "Runs every 5 minutes (stored in unix form as <code>0/5 * * * *</code>)."),
        ("30 9 * * 1-5", "Runs at 09:30 on Monday through Friday."),
        ("0 0 12 ? * MON-FRI", "Runs at 12:00 on Monday through Friday (stored in unix form as"),
        ("@daily", "Runs every day at 00:00."),
    ],
)
def test_schedule_preview_says_it_in_words_with_five_next_runs(browser, schedule, summary):
    response = htmx(browser, "/flows/new/?part=schedule", {"schedule": schedule})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert summary in html
    assert len(runs(html)) == 5
    assert "Next 5 runs, in UTC (the scheduler's time zone)" in html
    assert 'hx-swap-oob="innerHTML"' in html
    assert "HX-Request" in response["Vary"]


def test_next_runs_follow_the_expression_in_the_scheduler_time_zone(browser, settings):
    settings.TIME_ZONE = "Europe/Amsterdam"
    html = htmx(browser, "/flows/new/?part=schedule", {"schedule": "15 3 * * *"}).content.decode()
    found = runs(html)
    assert len(found) == 5
    assert all(iso.endswith(("+01:00", "+02:00")) and "03:15" in iso for iso, _text in found)
    assert all(re.search(r", 03:15 CES?T$", text) for _iso, text in found)
    assert "in Europe/Amsterdam" in html


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        ("61 * * * *", "minute 61 is outside 0-59"),
        ("5 4 * *", "has 4 fields"),
        ("30 0 0/5 * * * ?", "fires at second &#x27;30&#x27;"),
        ("every day", "has 2 fields"),
    ],
)
def test_a_bad_schedule_is_explained_and_has_no_runs(browser, schedule, error):
    html = htmx(browser, "/flows/new/?part=schedule", {"schedule": schedule}).content.decode()
    assert error in html
    assert runs(html) == []
    assert "Runs " not in html


def test_no_schedule_runs_once(browser):
    html = htmx(browser, "/flows/new/?part=schedule", {"schedule": "  "}).content.decode()
    assert "No schedule: the flow runs once, as soon as it is saved (unless it is paused)." in html
    assert runs(html) == []


def test_the_page_shows_the_same_preview(browser, owner):
    FlowConfigFactory(flow_group="g", flow_name="f", owner=owner, schedule="0 6 * * 0")
    html = browser.get("/flows/g/f/edit/").content.decode()
    assert "Runs at 06:00 on Sunday." in html
    assert len(runs(html)) == 5


# --- template attributes ----------------------------------------------------


def test_choosing_a_template_shows_its_attribute_fields(browser, topology_nodes, sales_pack):
    response = htmx(
        browser, "/flows/new/?part=attributes", {"template_uris": "pack://sales-pack/ingest/jdbc.template"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    for name, input_id in (
        ("source.jdbc.schema", "source-jdbc-schema"),
        ("source.jdbc.tables", "source-jdbc-tables"),
    ):
        assert (
            f'<label for="id_attr-{input_id}"><code>{name}</code> <span class="required">required</span>'
            in html
        )
        assert f'name="attr:{name}" id="id_attr-{input_id}" value=""' in html
    # Nothing typed yet: nothing reported yet.
    assert 'class="error"' not in html
    assert '<div id="id_template_uris_errors" hx-swap-oob="innerHTML">' in html


def test_attribute_descriptions_and_defaults_come_from_the_template(browser, topology_nodes, sales_pack):
    uri = "pack://sales-pack/ingest/documented.template"
    html = htmx(browser, "/flows/new/?part=attributes", {"template_uris": uri}).content.decode()
    # Described, with the suggested value filled in.
    assert 'name="attr:source.jdbc.tables" id="id_attr-source-jdbc-tables" value="orders"' in html
    assert "Tables to pull, comma-separated" in html
    assert "Suggested by the template: <code>orders</code>." in html
    # One the template fills itself: optional, its value shown.
    assert '<label for="id_attr-source-jdbc-schema"><code>source.jdbc.schema</code></label>' in html
    assert "The template gives <code>jdbc:postgresql://db/sales</code>; leave empty to keep it." in html
    # The compiler sets the hop keys; no field for them.
    assert "flowport.hop.destination.path" not in html


def test_typed_attribute_values_survive_a_template_change(browser, topology_nodes, sales_pack):
    data = {
        "template_uris": "pack://sales-pack/ingest/documented.template",
        "attr:source.jdbc.tables": "mine",
    }
    html = htmx(browser, "/flows/new/?part=attributes", data).content.decode()
    assert 'name="attr:source.jdbc.tables" id="id_attr-source-jdbc-tables" value="mine"' in html


def test_no_template_no_fields_and_an_unreadable_one_is_reported(browser, topology_nodes, sales_pack):
    assert htmx(browser, "/flows/new/?part=attributes", {"template_uris": ""}).content.decode().strip() == (
        '<div id="id_template_uris_errors" hx-swap-oob="innerHTML">\n</div>'
    )
    make_pack(UserFactory(username="sam"), name="hidden", templates={"x.template": "a = 1\n"})
    html = htmx(
        browser, "/flows/new/?part=attributes", {"template_uris": "pack://hidden/x.template"}
    ).content.decode()
    assert "pack://hidden/x.template" in html and "does not exist or you cannot read it" in html
    assert "<code>" not in html  # no attribute fields


# --- live field errors ------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "data", "error"),
    [
        ("schedule", {"schedule": "* * * * * * * *"}, "has 8 fields"),
        ("flow_group", {"flow_group": "a b"}, "Use 1-128 letters"),
        ("flow_name", {"flow_group": "sales", "flow_name": "taken"}, "Flow sales/taken already exists."),
        ("destinations", {"destinations": ["lake", "lake"]}, "A destination is listed twice."),
        (
            "properties",
            {"prop-0-key": "a", "prop-0-value": "1", "prop-5-key": "a"},
            "&#x27;a&#x27; is given twice.",
        ),
        ("properties_text", {"properties_text": "oops"}, "Line 1: write key=value"),
        ("secrets", {"secret-0-key": "", "secret-0-value": "x"}, "A secret has a value but no key"),
        (
            "attr:source.jdbc.tables",
            {"template_uris": "pack://sales-pack/ingest/jdbc.template"},
            "source.jdbc.tables is required by the chosen template.",
        ),
    ],
)
def test_a_field_is_checked_when_the_user_leaves_it(browser, owner, sales_pack, field, data, error):
    FlowConfigFactory(flow_group="sales", flow_name="taken", owner=owner)
    response = htmx(browser, f"/flows/new/?part=field&field={field}", data)
    assert response.status_code == 200
    assert error in response.content.decode()


def test_a_good_field_has_no_errors_even_when_others_do(browser):
    response = htmx(browser, "/flows/new/?part=field&field=schedule", {"schedule": "*/5 * * * *"})
    assert response.status_code == 200
    assert response.content.decode().strip() == ""


def test_live_checks_never_need_the_secret_values(browser):
    """Scripts strip secret values from live requests; a row without its
    value is not an error until the form is saved."""
    html = htmx(
        browser, "/flows/new/?part=field&field=secrets", {"secret-0-key": "db.password"}
    ).content.decode()
    assert html.strip() == ""


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        ("post", "/flows/new/?part=nonsense", 400),
        ("post", "/flows/new/?part=field&field=nonsense", 400),
        ("get", "/flows/new/?part=schedule", 405),
        ("put", "/flows/new/", 405),
    ],
)
def test_bad_part_requests_are_4xx(browser, method, url, status):
    assert getattr(browser, method)(url).status_code == status


# --- compile preview --------------------------------------------------------


def preview(browser, url: str = "/flows/new/?part=compile", **changes):
    data = {"flow_group": "sales", "flow_name": "orders", "source": "pg-sales", "destinations": ["archive"]}
    data["properties_text"] = "source.jdbc.tables=orders\nextract.is.full=true"  # what a JDBC source needs
    data.update(changes)
    return htmx(browser, url, {k: v for k, v in data.items() if v is not None})


def test_compile_preview_renders_the_job_dag_and_executors(browser, topology_nodes):
    response = preview(browser)
    assert response.status_code == 200
    html = response.content.decode()
    assert '<section class="card" id="compile-preview" aria-live="polite">' in html
    assert '<span class="badge compiled">compiled</span>' in html
    assert "<code>sales.orders.1-pg-sales-to-lake</code>" in html
    assert "<code>sales.orders.2-lake-to-archive</code>" in html
    assert (
        "ingest<br><code>executor.ingest</code>" in html
        and "replicate<br><code>executor.replicate</code>" in html
    )
    # The second job runs after the first: the first's name is also its parent.
    assert html.count("<code>sales.orders.1-pg-sales-to-lake</code>") == 2
    assert not FlowConfig.objects.exists()


def test_compile_preview_gives_the_pending_reason(browser, topology_nodes):
    from portal.topology import services as topology

    topology.create_data_node({"name": "island", "kind": "files", "properties": {"path": "var/data/island"}})
    html = preview(browser, destinations=["island"]).content.decode()
    assert '<span class="badge pending">pending</span>' in html
    assert "pg-sales → island: missing hop into island (no enabled executor writes to it" in html
    assert not FlowConfig.objects.exists()


def test_compile_preview_lists_the_forms_problems_instead(browser, topology_nodes, sales_pack):
    html = preview(
        browser, schedule="61 * * * *", template_uris="pack://sales-pack/ingest/jdbc.template"
    ).content.decode()
    assert 'class="errors"' in html
    assert "Schedule: &#x27;61 * * * *&#x27; is not a valid cron expression" in html
    assert "source.jdbc.schema: source.jdbc.schema is required by the chosen template." in html
    assert "<table" not in html


def test_compile_preview_of_an_edit_uses_the_stored_flow(browser, owner, topology_nodes):
    FlowConfigFactory(
        flow_group="sales", flow_name="orders", owner=owner, source="pg-sales", destinations=["lake"]
    )
    html = preview(browser, "/flows/sales/orders/edit/?part=compile").content.decode()
    assert "already exists" not in html
    assert "<code>sales.orders.2-lake-to-archive</code>" in html


def test_compile_preview_never_shows_a_typed_secret(browser, topology_nodes):
    html = preview(browser, **{"secret-0-key": "db.password", "secret-0-value": "hunter2"}).content.decode()
    assert "hunter2" not in html
    assert "db.password=ENC(…)" in html
