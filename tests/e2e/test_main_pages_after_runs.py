"""The first hour of a new portal, as issue #47 checked it under `make run`: staff create three
copies of the README's API example flow ("The REST API": the demo pack's files template, landing →
archive) through the API and run each once; then every main page, the flow list searched and
filtered too, and every API list answer 200 to staff and to an ordinary user, and none of the
web, worker and scheduler processes logs a traceback meanwhile. The suite runs it on PostgreSQL
with Redis and on SQLite with the serverless broker (`make test`'s two passes)."""

from __future__ import annotations

import pytest
import requests

from portal.flows.management.commands.load_demo import DEMO_FLOW, load_pack, write_sample_orders
from portal.orchestration.models import FINISHED_STATUSES, FlowExecution
from portal.topology import services as topology
from tests import ldap_server
from tests.builders.queues import LATE_QUEUE
from tests.e2e import ui
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MAIN_PAGES = [
    "/",
    "/flows/",
    "/flows/?q=myflow",
    "/flows/?flowGroup=mygroup",
    "/flows/?q=myflow&flowGroup=mygroup&lastRun=COMMITTED",
    "/flows/mygroup/myflow1/",
    "/executions/",
    "/executions/mygroup/myflow1/",
    "/topology/",
    "/packs/",
    "/keys/",
    "/quotas/",
    "/account/",
]


def signed_in(base: str, username: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/login/", timeout=30)
    answer = session.post(
        f"{base}/login/",
        data={
            "username": username,
            "password": ldap_server.PEOPLE[username][0],
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/login/"},
        allow_redirects=False,
        timeout=30,
    )
    assert answer.status_code == 302, answer.text[:500]
    session.headers.update({"X-CSRFToken": session.cookies["csrftoken"], "Referer": f"{base}/"})
    return session


def readme_flow(number: int) -> dict:
    """The README's example body (the demo flow's template, source and format), under its names."""
    return {
        "flowGroup": "mygroup",
        "flowName": f"myflow{number}",
        "schedule": "0 */6 * * *",
        "templateUris": DEMO_FLOW["template_uris"],
        "source": "landing",
        "destinations": ["archive"],
        "properties": {"source.files.format": "csv"},
    }


def test_after_three_runs_every_main_page_answers_staff_and_users_without_a_traceback(stack, lake, e2e_dir):
    logs = sorted((e2e_dir / "logs").glob("*.log"))
    already = {path: path.stat().st_size for path in logs}
    # The demo's topology in small: landing → lake on "ingest", lake → archive on "late".
    topology.create_executor(
        {"name": "late", "technology": "spark-local", "spark_master": "local[2]", "queue": LATE_QUEUE},
        capabilities=[("lake", "archive")],
    )
    write_sample_orders(lake / "landing" / "orders", rows=20)
    staff = signed_in(stack, "dana")
    user = signed_in(stack, "alice")
    load_pack(ui.user("dana"))

    for number in (1, 2, 3):
        created = staff.post(f"{stack}/api/flowconfigs", json=readme_flow(number), timeout=60)
        assert created.status_code == 201, created.text[:1000]
        run = staff.post(f"{stack}/api/flowconfigs/mygroup/myflow{number}/run", timeout=60)
        assert run.status_code in (200, 201, 202), run.text[:1000]

    def all_finished() -> bool:
        runs = FlowExecution.objects.filter(flow_group="mygroup")
        return runs.count() == 3 and all(run.status in FINISHED_STATUSES for run in runs)

    wait_until(all_finished, 600, "the three runs to finish", interval=1)
    assert sorted(FlowExecution.objects.values_list("flow_name", "status")) == [
        (f"myflow{number}", "COMMITTED") for number in (1, 2, 3)
    ]

    for who, session in (("staff", staff), ("user", user)):
        lists = session.get(f"{stack}/api/", timeout=60).json()["resources"]
        for address in [f"{stack}{path}" for path in MAIN_PAGES] + sorted(lists.values()):
            answer = session.get(address, timeout=60)
            if answer.status_code == 405 and "GET" not in answer.headers.get("Allow", ""):
                continue  # an action (POST only, e.g. api/flowconfigs/compile), not a list
            assert answer.status_code == 200, f"{who}: {address} answered {answer.status_code}"
        flows = session.get(f"{stack}/flows/?flowGroup=mygroup", timeout=60).text
        assert flows.count('class="run-strip"') == 3, f"{who}: the flow list shows every flow's last run"

    tracebacks = []
    for path in logs:
        with path.open("rb") as log:
            log.seek(already[path])
            written = log.read().decode(errors="replace")
        if "Traceback" in written:
            tracebacks.append(f"{path.name}:\n{written[written.index('Traceback') - 500 :][:3000]}")
    assert not tracebacks, "\n\n".join(tracebacks)
