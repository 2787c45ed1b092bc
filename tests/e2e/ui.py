"""What the browser tests do with a page: log in, take screenshots, prove a
page updated itself without reloading, run axe-core, wait for the worker."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from portal.flows import services as flow_services
from portal.orchestration.models import FINISHED_STATUSES, FlowExecution
from tests.integration.stack import ROOT, wait_until

ARTIFACTS = ROOT / "test-artifacts" / "e2e"
SOURCE = "tests.integration.sources.CountingSource"
SERIOUS = ("serious", "critical")


def screenshot(page: Page, name: str) -> Path:
    """A full-page PNG under test-artifacts/e2e/ (make clean removes it)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("header .who")).to_have_text(username)


@dataclass
class SameDocument:
    """A marker put on `window`: it survives only if the page was neither
    reloaded nor navigated away. Also counts the htmx swaps since."""

    page: Page
    token: str

    @classmethod
    def mark(cls, page: Page) -> SameDocument:
        token = secrets.token_hex(8)
        page.evaluate(
            """token => {
                window.__e2eMarker = token;
                window.__e2eSwaps = 0;
                document.body.addEventListener("htmx:afterSwap", () => { window.__e2eSwaps += 1; });
            }""",
            token,
        )
        return cls(page, token)

    def swaps(self) -> int:
        """The htmx swaps since marking; fails if the document was replaced."""
        marker = self.page.evaluate("() => window.__e2eMarker || null")
        assert marker == self.token, "the page was reloaded or navigated away"
        return self.page.evaluate("() => window.__e2eSwaps")


def run_axe(page: Page, axe_source: str) -> list[dict]:
    """axe-core's violations on the page as it is now (all default rules)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe_source)
    return page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
                nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(" "), summary: n.failureSummary})),
                count: v.nodes.length,
            }));
        }"""
    )


def describe_violations(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  [{v['impact']}] {v['id']}: {v['help']} ({v['count']} node(s)) {v['helpUrl']}")
        lines.extend(f"      {n['target']}: {n['summary']}".replace("\n", " ") for n in v["nodes"])
    return "\n".join(lines)


def save_json(name: str, data) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(data, indent=2))


# --- data ------------------------------------------------------------------------------------


def make_flow(owner, name: str, destination: str = "lake", **properties: str):
    props = {"source.class": SOURCE, "writer.output.format": "json", "numbers.per.run": "5", **properties}
    # No schedule = run once, as soon as it is saved (Gobblin): created switched off so the save runs
    # nothing, then switched on (which runs nothing either); the test runs it itself.
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "e2e",
            "flow_name": name,
            "source": "landing",
            "destinations": [destination],
            "properties": props,
            "paused": True,
        },
    )
    return flow_services.set_paused(flow, False)


def finished(execution: FlowExecution, timeout: float = 120) -> FlowExecution:
    def done() -> bool:
        execution.refresh_from_db()
        return execution.status in FINISHED_STATUSES

    wait_until(done, timeout, f"execution {execution.execution_id} to finish", interval=0.3)
    return execution


def user(username: str):
    return get_user_model().objects.get(username=username)


def published_ids(folder: Path) -> list[int]:
    ids: list[int] = []
    for path in sorted(folder.rglob("*.json")):
        ids.extend(json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip())
    return sorted(ids)


def htmx_idle(page: Page) -> None:
    """Wait until htmx has no request in flight and has settled what it swapped in: an
    element swapped in is wired to its own hx- triggers only once settled, so a change
    made on it before then (faster than any person) starts no request."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
    )
