"""A refusal is shown where the user is looking, on every htmx form: a staff
member adds a capability the server refuses (the message appears in place),
then removes one that another admin already removed (the 404's reason appears
beside the button)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from portal.topology.models import Capability
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def test_refused_capability_changes_say_why_in_place(page, logged_in, lake):
    assert logged_in("dana").is_staff
    page.goto("/topology/executors/ingest/")
    same_page = ui.SameDocument.mark(page)
    capabilities = page.locator("#capabilities")

    # lake → lake: the server answers 400 with the form and its error.
    capabilities.get_by_label("From", exact=True).select_option("lake")
    capabilities.get_by_label("to", exact=True).select_option("lake")
    capabilities.get_by_role("button", name="Add capability").click()
    expect(capabilities.get_by_role("alert")).to_contain_text("must be different")
    # The one it already has: refused too, and the list is unchanged.
    capabilities.get_by_label("From", exact=True).select_option("landing")
    capabilities.get_by_label("to", exact=True).select_option("lake")
    capabilities.get_by_role("button", name="Add capability").click()
    expect(capabilities.get_by_role("alert")).to_contain_text("ingest already has landing → lake")
    expect(capabilities.locator("tbody tr")).to_have_count(1)
    ui.screenshot(page, "capability-refused")

    # Another admin removes the capability meanwhile; this page still shows it.
    Capability.objects.filter(executor__name="ingest").delete()
    capabilities.get_by_role("button", name="Remove").click()
    expect(page.locator(".htmx-error[role=alert]")).to_contain_text("There is nothing at")
    assert same_page.swaps() >= 2  # every answer arrived in place, no page load
