"""What a person is told about a mistake, and where, on a desktop (1280 px) and a phone
(375 px): a schedule that never fires is refused at the schedule field, a bad value typed in a
template attribute is reported at that attribute, a misspelt property key is saved with a
warning naming the closest known key, an access-list mistake is shown in the box it was typed
in, and reloading an address a form was sent to answers a page in the site's layout."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from portal.flows.models import FlowConfig
from portal.templatepacks.models import PackAcl
from tests.e2e import ui
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = [1280, 375]
NUMBERS_TEMPLATE = """\
gobblin.template.required_attributes = "numbers.per.run"
flowport.attribute.numbers.per.run.default = "10"
source.class = tests.integration.sources.CountingSource
writer.output.format = json
"""
FILES_TEMPLATE = """\
gobblin.template.required_attributes = "source.files.format"
flowport.attribute.source.files.format.default = "csv"
writer.output.format = parquet
"""


def at_width(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900 if width > 400 else 812})


def fits(page: Page, width: int) -> None:
    """Nothing on the page is wider than the screen (no sideways scrolling on a phone)."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def start_flow(page: Page, name: str, template: str) -> None:
    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill(name)
    page.locator("#id_source").select_option("landing")
    page.locator("#id_destination-lake").check()
    page.locator("#id_template_uris").select_option(template)
    ui.htmx_idle(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_schedule_that_never_fires_is_refused_at_the_schedule_field(page, logged_in, lake, width):
    alice = logged_in("alice")
    make_pack(alice, name="numbers-pack", templates={"numbers.template": NUMBERS_TEMPLATE})
    at_width(page, width)
    start_flow(page, f"feb-{width}", "pack://numbers-pack/numbers.template")

    schedule = page.locator("#id_schedule")
    schedule.fill("0 0 31 2 *")  # February 31st: said while typing…
    errors = page.locator("#id_schedule_errors")
    expect(errors).to_contain_text("never fires")
    expect(errors).to_contain_text("day-of-month field (31) names no day that February has")
    ui.htmx_idle(page)
    page.locator("#save-flow").click()  # …and on save, at the same field, nothing saved
    expect(page.locator("#id_schedule_errors")).to_contain_text("never fires")
    expect(page.locator("#id_schedule")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_schedule")).to_have_value("0 0 31 2 *")
    assert not FlowConfig.objects.filter(flow_name=f"feb-{width}").exists()
    fits(page, width)
    ui.screenshot(page, f"messages-cron-never-fires-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_bad_template_attribute_value_is_reported_at_that_attribute(page, logged_in, lake, width):
    alice = logged_in("alice")
    make_pack(alice, name="files-pack", templates={"files.template": FILES_TEMPLATE})
    at_width(page, width)
    start_flow(page, f"formats-{width}", "pack://files-pack/files.template")

    attribute = page.locator("#id_attr-source-files-format")
    expect(attribute).to_have_value("csv")
    attribute.fill("xml")
    page.locator("#id_schedule").fill("0 3 * * *")
    ui.htmx_idle(page)
    page.locator("#save-flow").click()
    said = page.locator("#id_attr-source-files-format_errors")
    expect(said).to_contain_text("unknown value 'xml' in 'source.files.format'")
    expect(page.locator("#field-properties")).not_to_contain_text("unknown value")
    # The summary at the top takes the reader to the input.
    page.locator(".error-summary a[href='#id_attr-source-files-format']").first.click()
    expect(attribute).to_be_focused()
    assert not FlowConfig.objects.filter(flow_name=f"formats-{width}").exists()
    fits(page, width)
    ui.screenshot(page, f"messages-attribute-error-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_misspelt_property_key_is_saved_with_a_warning_naming_the_closest_key(page, logged_in, lake, width):
    alice = logged_in("alice")
    make_pack(alice, name="numbers-pack", templates={"numbers.template": NUMBERS_TEMPLATE})
    at_width(page, width)
    start_flow(page, f"typo-{width}", "pack://numbers-pack/numbers.template")
    page.locator("#id_schedule").fill("0 3 * * *")
    page.locator("#id_prop-0-key").fill("source.file.fromat")
    page.locator("#id_prop-0-value").fill("csv")
    ui.htmx_idle(page)
    page.locator("#save-flow").click()

    expect(page).to_have_url(re.compile(rf"/flows/e2e/typo-{width}/$"))
    warning = page.locator(".messages .message.warning")
    expect(warning).to_contain_text("'source.file.fromat' is no key Flowport knows")
    expect(warning).to_contain_text("did you mean 'source.files.format'?")
    assert FlowConfig.objects.get(flow_name=f"typo-{width}").properties["source.file.fromat"] == "csv"
    fits(page, width)
    ui.screenshot(page, f"messages-typo-warning-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_access_list_mistake_is_shown_where_it_was_typed_then_a_reload_explains_itself(
    page, logged_in, lake, width
):
    alice = logged_in("alice")
    pack = make_pack(alice, name=f"acl-pack-{width}", templates={"a.template": "a = 1\n"})
    at_width(page, width)
    page.goto(f"/packs/{pack.name}/")
    page.get_by_text("Edit access").click()
    page.get_by_label("Readers").fill("group:etl-team\nuser:ghost")
    page.get_by_role("button", name="Save access list").click()

    readers = page.locator("#id_readers_error")
    expect(readers).to_contain_text("'user:ghost': no user named 'ghost'.")
    expect(readers).not_to_contain_text("entry")
    expect(page.get_by_label("Readers")).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".errors[role=alert]")).to_have_count(0)  # nothing at the top of the form
    assert list(PackAcl.objects.filter(pack=pack).values_list("role", flat=True)) == ["owner"]
    fits(page, width)
    ui.screenshot(page, f"messages-acl-entry-{width}")

    # The address bar shows the form's address; opening it again is a visit, not a submission.
    answer = page.goto(f"/packs/{pack.name}/acl/")
    assert answer is not None and answer.status == 405
    expect(page.locator("h1")).to_have_text("Not a page to open")
    expect(page.locator("main")).to_contain_text("Nothing was changed.")
    expect(page.locator("header .who")).to_have_text("alice")  # the site's layout, signed in
    fits(page, width)
    ui.screenshot(page, f"messages-405-{width}")
    page.get_by_role("link", name="Back to the page the form is on").click()
    expect(page).to_have_url(re.compile(rf"/packs/{pack.name}/$"))
