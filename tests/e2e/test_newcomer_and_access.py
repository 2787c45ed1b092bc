"""A newcomer's first minutes in a real browser, at a desktop and a phone width: bob signs in for
the first time and lands on the start page, which says his next step (a source data node); he
follows it to the data nodes, finds alice's node among those he may ask for and presses Request
access; alice signs in, sees his request on her dashboard and approves it; the node is then among
those bob may use. axe-core finds nothing serious on the new pages, and none scrolls sideways."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from portal.topology import services as topology
from tests import ldap_server
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

SERIOUS = ("serious", "critical")


def looks_right(page: Page, axe_source: str, name: str) -> None:
    page.wait_for_load_state("networkidle")
    serious = [v for v in ui.run_axe(page, axe_source) if v["impact"] in SERIOUS]
    assert serious == [], f"{name}:\n{ui.describe_violations(serious)}"
    scroll, window = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert scroll <= window, f"{name} scrolls sideways: {scroll}px in {window}px"
    ui.screenshot(page, name)


@pytest.mark.parametrize("width", [1280, 375])
def test_first_login_next_step_then_a_request_the_owner_approves(browser, stack, axe_source, tmp_path, width):
    get_user_model().objects.create_user("alice")  # the directory's alice, known before her first login
    (tmp_path / "exports").mkdir()
    topology.create_data_node(
        {
            "name": "shop-exports",
            "kind": "files",
            "description": "Alice's nightly shop exports",
            "properties": {"path": str(tmp_path / "exports")},
            "acl": [{"role": "owner", "user": "alice"}],
        }
    )
    viewport = {"width": width, "height": 900 if width > 600 else 812}
    contexts = [browser.new_context(base_url=stack, viewport=viewport) for _ in range(2)]
    bob, alice = (context.new_page() for context in contexts)
    try:
        ui.log_in(bob, "bob", ldap_server.PEOPLE["bob"][0])
        expect(bob).to_have_url(re.compile(r"/monitoring/start/$"))
        expect(bob.locator("#next-step")).to_contain_text("Your next step: add a source data node")
        looks_right(bob, axe_source, f"start-{width}")

        bob.locator("#step-source").get_by_role("link", name="Data nodes (sources & destinations)").click()
        row = bob.locator("#askable-nodes tr", has_text="shop-exports")
        expect(row).to_contain_text("alice")
        expect(row).to_contain_text("Alice's nightly shop exports")
        row.get_by_role("button", name="Request access to shop-exports").click()
        expect(bob.locator(".messages")).to_contain_text("Asked to read shop-exports")
        expect(bob.locator("#askable-nodes tr", has_text="shop-exports")).to_contain_text(
            "asked to read; waiting"
        )
        looks_right(bob, axe_source, f"datanodes-asked-{width}")

        ui.log_in(alice, "alice", ldap_server.PEOPLE["alice"][0])
        expect(alice).to_have_url(re.compile(r"/monitoring/$"))  # an owner is no newcomer
        waiting = alice.locator("#access-requests")
        expect(waiting).to_contain_text("bob asks to read shop-exports")
        looks_right(alice, axe_source, f"dashboard-requests-{width}")
        waiting.get_by_role("button", name="Approve: bob may read shop-exports").click()
        expect(alice).to_have_url(re.compile(r"/monitoring/$"))
        expect(alice.locator(".messages")).to_contain_text("bob may now read shop-exports.")
        expect(alice.locator("#access-requests")).to_have_count(0)

        bob.reload()
        expect(bob.locator("#usable-nodes")).to_contain_text("shop-exports")
        expect(bob.locator("#askable-nodes")).not_to_contain_text("shop-exports")
    finally:
        for context in contexts:
            context.close()
