"""axe-core (from npm, tests/e2e/node_modules) run in the browser on the main
pages at a desktop, a tablet and a phone width: no serious or critical
violation, and no page wider than the window (nothing to scroll sideways).
Lesser violations are printed and saved with the results under
test-artifacts/e2e/."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from portal.flows import services as flows
from portal.orchestration import services
from portal.templatepacks import services as packs
from tests import ldap_server
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": 1280, "tablet": 760, "phone": 375}


def _ready(page: Page, path: str) -> None:
    page.goto(path)
    page.wait_for_load_state("networkidle")


@pytest.mark.parametrize("width_name", list(WIDTHS))
def test_the_main_pages_have_no_serious_accessibility_violations(axe_source, page, lake, width_name):
    width = WIDTHS[width_name]
    page.set_viewport_size({"width": width, "height": 900 if width > 600 else 812})
    results: dict[str, list[dict]] = {}
    too_wide: list[str] = []

    def check(name: str) -> None:
        results[name] = ui.run_axe(page, axe_source)
        ui.screenshot(page, f"{name}-{width_name}")
        scroll, window = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        if scroll > window:
            too_wide.append(f"{name}: {scroll}px wide in a {window}px window")

    _ready(page, "/login/")
    check("login")
    # Staff (dana) see every control: the topology's admin buttons too.
    page.get_by_label("Username").fill("dana")
    page.get_by_label("Password").fill(ldap_server.PEOPLE["dana"][0])
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("header .who")).to_have_text("dana")
    dana = ui.user("dana")
    flow = ui.make_flow(dana, "a11y")
    execution = ui.finished(services.run_now(flow, user=dana))
    assert execution.status == "COMMITTED", execution.message
    path = f"/executions/e2e/a11y/{execution.execution_id}/"

    _ready(page, "/")
    check("dashboard")
    _ready(page, "/flows/")
    check("flows")
    _ready(page, "/flows/e2e/a11y/")
    expect(page.locator("#flow-executions table")).to_be_visible()
    check("flow")
    _ready(page, path)
    expect(page.locator("pre.log")).to_be_visible()
    check("execution")
    _ready(page, f"{path}jobs/{execution.jobs.get().job_name}/log/")
    expect(page.locator("pre.log-full").first).to_be_visible()
    check("job-log")
    _ready(page, f"{path}jobs/{execution.jobs.get().job_name}/log/?q=task&level=INFO")
    expect(page.locator("pre.log-filtered").first).to_be_visible()
    check("job-log-filtered")
    _ready(page, "/executions/")
    check("executions")
    _ready(page, "/executions/e2e/a11y/backfill/")
    check("backfill")
    _ready(page, "/topology/")
    check("topology-overview")
    _ready(page, "/topology/executors/ingest/")
    check("executor")
    # Connect and discover, and subscriptions.
    (lake / "landing" / "orders").mkdir()
    (lake / "landing" / "orders" / "a.csv").write_text("id,customer_name_that_is_rather_long\n1,ann\n")
    _ready(page, "/topology/datanodes/landing/")
    page.get_by_role("button", name="Test connection").click()
    page.get_by_role("button", name="Discover tables and files").click()
    expect(page.locator("#discovery-summary")).to_be_visible()
    expect(page.locator("#connection-verdict")).to_be_visible()
    check("datanode")
    _ready(page, "/topology/datanodes/new/")
    check("datanode-new")
    _ready(page, "/monitoring/flows/e2e/a11y/subscription/")
    check("flow-subscribe")
    page.get_by_label("Webhook URL").fill(
        "https://hooks.example.org/flowport/a/rather/long/path/for/narrow/screens"
    )
    page.get_by_role("button", name="Subscribe").click()
    expect(page.locator("#subscription-summary")).to_be_visible()
    _ready(page, "/account/")
    expect(page.locator("#subscription-table")).to_contain_text("e2e / a11y")
    check("profile-subscriptions")
    _ready(page, "/notifications/")
    check("notifications")
    _ready(page, "/keys/")
    check("keys")
    # A pack with a long line and a change, its history with every diff open.
    long_line = "extract.namespace = " + "very.long.namespace.name" * 12
    pack = packs.create_pack(user=dana, name="a11y-pack")
    packs.save_template(pack, user=dana, path="ingest/wide.template", text=f"{long_line}\na = 1\n")
    packs.save_template(pack, user=dana, path="ingest/wide.template", text=f"{long_line}\na = 2\n")
    _ready(page, "/packs/")
    check("packs")
    _ready(page, "/packs/a11y-pack/")
    check("pack")
    _ready(page, "/packs/a11y-pack/history/")
    page.evaluate("document.querySelectorAll('details.diff').forEach(d => d.open = true)")
    expect(page.locator("pre.diff .diff-add").first).to_be_visible()
    check("pack-history-diffs")
    # A version's page, two versions compared, and the flows using the pack.
    flows.update_flow(flow, data={"template_uris": "pack://a11y-pack/ingest/wide.template"})
    _ready(page, "/packs/a11y-pack/versions/1/")
    check("pack-version")
    _ready(page, "/packs/a11y-pack/compare/?from=1&to=2")
    expect(page.locator("pre.diff .diff-add").first).to_be_visible()
    check("pack-compare")
    _ready(page, "/packs/a11y-pack/flows/")
    check("pack-flows")
    # A paused flow: its badge, note and Resume button.
    flows.set_paused(flow, True, by="dana")
    _ready(page, "/flows/e2e/a11y/")
    expect(page.locator("#paused-note")).to_be_visible()
    check("flow-paused")
    if width < 800:  # the folded menu, opened
        page.get_by_role("button", name="Menu").click()
        expect(page.get_by_role("navigation", name="Main")).to_be_visible()
        check("menu-open")
    _ready(page, "/flows/new/")
    check("flow-new")
    page.locator("#id_source").select_option("landing")
    page.get_by_role("button", name="Pick a table and columns from the source…").click()
    ui.htmx_idle(page)
    page.get_by_label("Folder (dataset)").select_option("orders")
    expect(page.locator("#source-picker")).to_contain_text("customer_name_that_is_rather_long")
    check("flow-new-picker")
    # The form as a person sees it after a mistake: a live error and the preview's problems.
    page.locator("#id_schedule").fill("every night at 3")
    expect(page.locator("#id_schedule_errors .error")).to_be_visible()
    page.locator("#compile-preview-button").click()
    expect(page.locator("#compile-preview .errors")).to_be_visible()
    check("flow-new-errors")

    ui.save_json(f"axe-{width_name}", results)
    assert not too_wide, f"pages that scroll sideways at {width}px: {too_wide}"
    serious, lesser = [], []
    for name, violations in results.items():
        for violation in violations:
            (serious if violation["impact"] in ui.SERIOUS else lesser).append((name, violation))
    for name, violation in lesser:
        print(f"axe {width_name} {name}:\n{ui.describe_violations([violation])}")
    assert not serious, f"serious accessibility violations at {width}px:\n" + "\n".join(
        f"{name}:\n{ui.describe_violations([violation])}" for name, violation in serious
    )
