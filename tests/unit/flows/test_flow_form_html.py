"""The flow form's HTML: read the way a browser reads it (the other
test_flow_form* modules submit the form exactly as it was rendered with these
helpers), and checked for what assistive technology needs: a label for every
input, errors tied to their inputs, stable ids."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from portal.topology import services as topology
from tests.unit.templatepacks.factories import SALES_TEMPLATES, make_pack
from tests.unit.topology.helpers import executor

ATTRIBUTES_TEMPLATE = """\
gobblin.template.required_attributes = "source.jdbc.tables,source.jdbc.schema,flowport.hop.destination.path"
flowport.attribute.source.jdbc.tables.description = "Tables to pull, comma-separated"
flowport.attribute.source.jdbc.tables.default = "orders"
source.jdbc.schema = "jdbc:postgresql://db/sales"
writer.output.format = parquet
"""


class FormReader(HTMLParser):
    """Fields of <form id="flow-form"> as a browser would post them (not the
    <template> rows a script copies), plus every label's `for` and every id."""

    def __init__(self, form_id: str = "flow-form") -> None:
        super().__init__()
        self.form_id = form_id
        self.in_form = False
        self.template_depth = 0
        self.fields: list[tuple[str, str]] = []
        self.inputs: list[dict[str, str]] = []  # every control, with its attributes
        self.label_for: set[str] = set()
        self.ids: set[str] = set()
        self._select: str | None = None
        self._option: dict[str, str] | None = None
        self._first_option: str | None = None
        self._selected = False
        self._textarea: dict[str, str] | None = None
        self._text: list[str] = []
        self._label_depth = 0
        self.wrapped_ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v if v is not None else "") for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "form" and a.get("id") == self.form_id:
            self.in_form = True
        if tag == "template":
            self.template_depth += 1
        if not self.in_form or self.template_depth:
            return
        if tag == "label":
            self._label_depth += 1
            if "for" in a:
                self.label_for.add(a["for"])
        if tag == "input":
            self.inputs.append({"tag": "input", **a})
            if self._label_depth and "id" in a:
                self.wrapped_ids.add(a["id"])
            kind = a.get("type", "text")
            if "name" not in a or "disabled" in a:
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields.append((a["name"], a.get("value", "on")))
            elif kind not in ("submit", "button"):
                self.fields.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self.inputs.append({"tag": "select", **a})
            self._select, self._first_option, self._selected = a.get("name"), None, False
        elif tag == "option" and self._select:
            self._option = a
            if self._first_option is None:
                self._first_option = a.get("value", "")
            if "selected" in a:
                self.fields.append((self._select, a.get("value", "")))
                self._selected = True
        elif tag == "textarea":
            self.inputs.append({"tag": "textarea", **a})
            self._textarea, self._text = a, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "template":
            self.template_depth -= 1
        if tag == "form" and self.in_form:
            self.in_form = False
        if tag == "label" and self._label_depth:
            self._label_depth -= 1
        if tag == "select" and self._select:
            if not self._selected and self._first_option is not None:
                self.fields.append((self._select, self._first_option))
            self._select = None
        if tag == "textarea" and self._textarea is not None:
            text = "".join(self._text)
            if text.startswith("\n"):
                text = text[1:]
            self.fields.append((self._textarea["name"], text))
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)


def read_form(html: str | bytes) -> FormReader:
    reader = FormReader()
    reader.feed(html.decode() if isinstance(html, bytes) else html)
    return reader


def as_post(fields: list[tuple[str, str]], **changes: str | list[str]) -> dict[str, str | list[str]]:
    """Posted fields as the test client wants them (repeated names as lists)."""
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    posted: dict[str, str | list[str]] = {k: v if len(v) > 1 else v[0] for k, v in data.items()}
    posted.pop("csrfmiddlewaretoken", None)
    posted.update(changes)
    return posted


def submit_as_rendered(client: Client, url: str, **changes: str | list[str]):
    """GET the form page, then POST it back with only `changes` made."""
    page = client.get(url)
    assert page.status_code == 200
    return client.post(url, as_post(read_form(page.content).fields, **changes))


def htmx(client: Client, url: str, data: dict):
    return client.post(url, data, headers={"HX-Request": "true"})


# --- what the flow form tests share (each module wraps them in its fixtures) ---


def make_topology_nodes() -> None:
    """pg-sales (jdbc) → lake → archive, each with a description."""
    for name, kind, description, props in (
        ("pg-sales", "jdbc", "Sales orders in PostgreSQL", {"url": "jdbc:postgresql://db/sales"}),
        ("lake", "files", "Parquet lake on the shared disk", {"path": "var/data/lake"}),
        ("archive", "files", "Cold archive", {"path": "var/data/archive"}),
    ):
        topology.create_data_node(
            {"name": name, "kind": kind, "description": description, "properties": props}
        )
    executor("ingest", "pg-sales>lake")
    executor("replicate", "lake>archive")


def make_sales_pack(owner):
    """The sales pack (base + ingest/jdbc, which requires source.jdbc.schema and
    source.jdbc.tables) plus an attribute-documented template."""
    return make_pack(owner, templates={**SALES_TEMPLATES, "ingest/documented.template": ATTRIBUTES_TEMPLATE})


# --- accessibility of the page -------------------------------------------------

pytestmark = pytest.mark.django_db


def _controls(reader: FormReader) -> list[dict[str, str]]:
    return [c for c in reader.inputs if c.get("type") not in ("hidden", "submit", "button")]


def test_every_input_has_a_label_and_its_descriptions_exist(browser, topology_nodes, sales_pack):
    page = browser.get("/flows/new/")
    reader = read_form(page.content)
    controls = _controls(reader)
    assert len(controls) > 10
    for control in controls:
        assert control.get("id"), control
        assert control["id"] in reader.label_for or control["id"] in reader.wrapped_ids, control
        for described_by in control.get("aria-describedby", "").split():
            assert described_by in reader.ids, (control["id"], described_by)


def test_errors_are_tied_to_their_inputs_after_a_failed_save(browser, topology_nodes, sales_pack):
    page = browser.post(
        "/flows/new/",
        {
            "flow_group": "sales",
            "flow_name": "bad name!",
            "schedule": "61 * * * *",
            "template_uris": "pack://sales-pack/ingest/jdbc.template",
        },
    )
    assert page.status_code == 400
    html = page.content.decode()
    reader = read_form(html)
    by_id = {c["id"]: c for c in _controls(reader)}
    for input_id in (
        "id_flow_name",
        "id_schedule",
        "id_attr-source-jdbc-schema",
        "id_attr-source-jdbc-tables",
    ):
        assert by_id[input_id].get("aria-invalid") == "true", input_id
        assert f"{input_id}_errors" in by_id[input_id]["aria-describedby"].split()
    # The summary at the top links to each input.
    assert 'role="alert"' in html
    for target in ("#id_flow_name", "#id_schedule", "#id_attr-source-jdbc-tables"):
        assert f'href="{target}"' in html
    assert "minute 61 is outside 0-59" in html


def test_the_summary_names_each_problems_errors_box_so_it_follows_live_checks(
    browser, topology_nodes, sales_pack
):
    """flowform.js drops a summary item once live validation empties the
    errors box the item names (data-errors), and hides the summary with the
    last one: each item must name the box that shows the same problem."""
    html = browser.post(
        "/flows/new/",
        {
            "flow_group": "sales",
            "flow_name": "bad name!",
            "schedule": "61 * * * *",
            "template_uris": "pack://sales-pack/ingest/jdbc.template",
        },
    ).content.decode()
    summary = html.split('id="error-summary"')[1].split("</div>")[0]
    items = re.findall(r'<li data-errors="([^"]+)"><a href="#([^"]+)">[^:<]+: ([^<]+)</a></li>', summary)
    assert {box for box, _target, _message in items} >= {
        "id_flow_name_errors",
        "id_schedule_errors",
        "id_attr-source-jdbc-schema_errors",
        "id_attr-source-jdbc-tables_errors",
    }
    for box, target, message in items:
        assert f'id="{target}"' in html
        shown = html.split(f'id="{box}"')[1].split("</div>")[0]
        assert f'<p class="error">{message}</p>' in shown, box
    # Once the name is fixed, its live check answers an empty box: the script drops the item.
    fixed = htmx(
        browser, "/flows/new/?part=field&field=flow_name", {"flow_group": "sales", "flow_name": "orders"}
    )
    assert 'class="error"' not in fixed.content.decode()


def test_the_page_uses_stable_ids_for_browser_tests(browser, topology_nodes, sales_pack):
    html = browser.get("/flows/new/").content.decode()
    for element_id in (
        "flow-form",
        "id_flow_group",
        "id_flow_name",
        "id_source",
        "field-destinations",
        "id_destination-lake",
        "id_template_uris",
        "template-attributes",
        "id_schedule",
        "schedule-summary",
        "schedule-runs",
        "id_run_immediately",
        "prop-rows",
        "id_prop-0-key",
        "id_prop-0-value",
        "secret-rows",
        "id_secret-0-key",
        "id_secret-0-value",
        "compile-preview-button",
        "compile-preview",
        "save-flow",
    ):
        assert f'id="{element_id}"' in html, element_id
    assert 'src="/static/js/flowform.js"' in html
