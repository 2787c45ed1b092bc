"""The flow form's HTML: read the way a browser reads it (tests/builders/forms.py, with which
the other test_flow_form* modules submit the form exactly as it was rendered), and checked
for what assistive technology needs: a label for every input, errors tied to their inputs,
stable ids."""

from __future__ import annotations

import re

import pytest

from tests.builders.forms import FormReader, htmx, read_form

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
