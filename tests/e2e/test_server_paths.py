"""A user who is not staff goes through the pages that name a files node's folder — the node's
page and its connection test, her flow's compile preview with its job properties — and meets no
absolute path of the portal's server: the node's root reads in words, paths inside it relative
to it. Staff see the folder as stored. At 1280 and 375 px."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def compile_preview_of_her_flow(page: Page) -> None:
    """From the flows list: her flow, Edit, Preview compilation, the job's properties opened."""
    page.goto("/flows/")
    page.locator('tr[data-flow="e2e/orders"]').get_by_role("link", name="e2e/orders").click()
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/orders/edit/$"))
    page.locator("#compile-preview-button").click()
    preview = page.locator("#compile-preview")
    expect(preview).to_contain_text("compiled")
    preview.locator("summary", has_text="keys").first.click()


def test_a_user_meets_no_server_folder_and_staff_see_it(page, logged_in, lake, axe_source):
    alice = logged_in("alice")
    ui.make_flow(alice, "orders")

    # The data node she reads from: its folder in words, no server path.
    page.goto("/topology/datanodes/")
    page.get_by_role("link", name="landing", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"/topology/datanodes/landing/$"))
    main = page.locator("main")
    expect(main).to_contain_text("a folder on the portal's server")
    expect(main).not_to_contain_text(str(lake))
    ui.screenshot(page, "server-paths-node-1280")

    # Her flow's compile preview names the hop nodes' roots the same way.
    compile_preview_of_her_flow(page)
    preview = page.locator("#compile-preview")
    expect(preview).to_contain_text("flowport.hop.source.path=(a folder on the portal's server")
    expect(preview).not_to_contain_text(str(lake))
    ui.screenshot(page, "server-paths-compile-preview-1280")
    violations = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)

    # On a phone: the same, and the page fits the screen.
    page.set_viewport_size({"width": 375, "height": 812})
    compile_preview_of_her_flow(page)
    expect(page.locator("#compile-preview")).not_to_contain_text(str(lake))
    no_sideways_scroll(page)
    ui.screenshot(page, "server-paths-compile-preview-375")

    # Staff see where the folder is.
    get_user_model().objects.filter(pk=alice.pk).update(is_staff=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/topology/datanodes/landing/")
    expect(page.locator("main")).to_contain_text(str(lake / "landing"))
