"""Attacker stories against the Spark UI proxy (/executions/<flow>/<id>/jobs/<job>/spark-ui/…).

The proxy is a way from the web node to another address, so each story checks what reached the
other side. A recording HTTP server on loopback stands for the worker's Spark UI: it writes down
every request it receives, answers with a cookie of its own, and redirects where the story asks.

* Olivia owns the flow, Mia is in its group, Oscar reads it: none of them reaches the UI (it shows
  every job its worker ran); the request never leaves the portal. An anonymous visitor logs in.
* Stella (staff) cannot be sent anywhere else: a ``..`` path, an encoded one, ``//host``, an
  absolute URL, a backslash, all refused before any request; the target is only the address
  the worker recorded for that job, never one from the request (Host, query, headers).
* Her cookies and authorization stay in the portal; the UI's Set-Cookie never reaches her; only
  GET goes through; Spark's kill handlers are refused; a redirect out of the UI is not followed.
* Another job's UI: a finished job's recorded address, one with credentials, a path or another
  scheme is not reached; asking through one running job reaches that job's UI only.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from portal.orchestration.models import JobExecution
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory


@dataclass
class Recorder:
    """A stand-in for a worker's Spark UI on loopback, writing down what reaches it."""

    server: http.server.ThreadingHTTPServer
    requests: list[dict[str, Any]] = field(default_factory=list)
    redirect_to: str = ""

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    started: list[Recorder] = []

    def start() -> Recorder:
        recorder: Recorder

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers.items())}
                )
                if recorder.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", recorder.redirect_to)
                else:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html;charset=utf-8")
                self.send_header("Set-Cookie", "JSESSIONID=from-the-ui; Path=/")
                self.send_header("X-Upstream-Secret", "kept-upstream")
                self.end_headers()
                self.wfile.write(b"<p>the worker's UI</p>")

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        recorder = Recorder(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(recorder)
        return recorder

    start(), start()
    yield started
    for recorder in started:
        recorder.server.shutdown()
        recorder.server.server_close()


@dataclass
class World:
    people: dict[str, Any]
    job: JobExecution
    ui: Recorder
    other_ui: Recorder

    def base(self, job: JobExecution | None = None) -> str:
        job = job or self.job
        e = job.execution
        return f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/spark-ui"

    def client(self, person: str) -> Client:
        client = Client()
        if person != "anonymous":
            client.force_login(self.people[person])
        return client

    def reached(self) -> list[dict[str, Any]]:
        return self.ui.requests + self.other_ui.requests


@pytest.fixture
def world(db, recorders) -> World:
    owner = UserFactory(username="olivia")
    member = UserFactory(username="mia")
    team = Group.objects.create(name="team")
    member.groups.add(team)
    people = {
        "owner": owner,
        "member": member,
        "outsider": UserFactory(username="oscar"),
        "staff": UserFactory(username="stella", is_staff=True),
    }
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders", owning_group=team)
    execution = FlowExecutionFactory(flow=flow, status="RUNNING")
    ui, other_ui = recorders
    job = JobExecutionFactory(
        execution=execution, job_name="sales.orders.1-a-to-b", status="RUNNING", spark_ui_url=ui.url
    )
    return World(people, job, ui, other_ui)


@pytest.mark.parametrize("person", ["owner", "member", "outsider"])
def test_a_tenant_does_not_reach_the_workers_ui(world: World, person: str):
    """Even the flow's owner: the UI shows every job the worker ran, other owners' too."""
    for path in ("/", "/jobs/", "/environment/"):
        response = world.client(person).get(world.base() + path)
        assert response.status_code == 403
        assert b"every job that worker ran" in response.content
    assert world.reached() == []


def test_an_anonymous_visitor_is_sent_to_log_in(world: World):
    response = world.client("anonymous").get(world.base() + "/jobs/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert world.reached() == []


@pytest.mark.parametrize(
    "path",
    [
        "/../../../admin/",
        "/jobs/../../../../api/",
        "/%2e%2e/%2e%2e/admin/",
        "/..%2f..%2fadmin/",
        "//169.254.169.254/latest/meta-data/",
        "/http://169.254.169.254/latest/meta-data/",
        "/http:/169.254.169.254/",
        "/jobs\\..\\..\\admin",
        "/jobs/job/kill/",
        "/stages/stage/kill/",
    ],
)
def test_staff_cannot_be_sent_past_the_recorded_ui(world: World, path: str):
    response = world.client("staff").get(world.base() + path, {"id": "0"})
    assert response.status_code == 400, response.content
    assert world.reached() == []


def test_the_target_is_the_recorded_address_whatever_the_request_says(world: World):
    """A Host header, a forwarding header and a URL in the query name the other UI: the request
    still goes to the job's own UI, with the query as a query of that UI."""
    response = world.client("staff").get(
        world.base() + "/jobs/",
        {"url": world.other_ui.url, "next": "//evil.example/"},
        HTTP_X_FORWARDED_HOST="evil.example",
        HTTP_X_FORWARDED_CONTEXT="/evil",
    )
    assert response.status_code == 200
    assert world.other_ui.requests == []
    [request] = world.ui.requests
    assert request["path"].startswith("/jobs/?url=http%3A%2F%2F127.0.0.1%3A")
    assert request["headers"]["X-Forwarded-Context"] == world.base()  # the proxy's, not the reader's
    assert request["headers"]["Host"] == world.ui.url.removeprefix("http://")


def test_cookies_and_authorization_stay_in_the_portal(world: World):
    stella = world.client("staff")
    stella.cookies["csrftoken"] = "token-of-stella"
    response = stella.get(world.base() + "/jobs/", HTTP_AUTHORIZATION="Bearer stellas-api-token")
    assert response.status_code == 200 and response.content == b"<p>the worker's UI</p>"
    [request] = world.ui.requests
    sent = {name.lower() for name in request["headers"]}
    assert not sent & {"cookie", "authorization", "x-csrftoken", "referer"}
    assert "stella" not in str(request["headers"]) and "token" not in str(request["headers"]).lower()
    assert "JSESSIONID" not in str(response.cookies) and "X-Upstream-Secret" not in response
    assert response["Cache-Control"] == "private, no-store"


@pytest.mark.parametrize("method", ["post", "put", "delete", "head"])
def test_only_get_goes_through(world: World, method: str):
    response = getattr(world.client("staff"), method)(world.base() + "/jobs/job/")
    assert response.status_code == 405
    assert world.reached() == []


def test_a_redirect_out_of_the_ui_is_not_followed(world: World):
    world.ui.redirect_to = world.other_ui.url + "/secret"
    response = world.client("staff").get(world.base() + "/jobs/")
    assert response.status_code == 502 and "Location" not in response
    assert world.other_ui.requests == []
    world.ui.redirect_to = "/jobs/"  # inside the UI: comes back under the proxy's address
    response = world.client("staff").get(world.base() + "/")
    assert response.status_code == 302 and response["Location"] == world.base() + "/jobs/"
    assert world.other_ui.requests == []


def test_another_jobs_ui_is_not_reached_through_a_job(world: World):
    """A finished job keeps the address its worker recorded, and the UI there still answers: the
    proxy no longer goes there. Addresses no worker would record are never reached either."""
    finished = JobExecutionFactory(
        execution=world.job.execution,
        job_name="sales.orders.2-b-to-c",
        status="COMMITTED",
        spark_ui_url=world.other_ui.url,
    )
    stella = world.client("staff")
    assert stella.get(world.base(finished) + "/jobs/").status_code == 404
    port = world.other_ui.url.rsplit(":", 1)[1]
    for recorded in (
        f"http://user:password@127.0.0.1:{port}",
        f"http://127.0.0.1:{port}/admin/",
        f"file:///etc/passwd#{port}",
        f"gopher://127.0.0.1:{port}/",
    ):
        finished.status, finished.spark_ui_url = "RUNNING", recorded
        finished.save()
        assert stella.get(world.base(finished) + "/jobs/").status_code == 404, recorded
    assert world.other_ui.requests == []
    assert stella.get(world.base() + "/jobs/").status_code == 200  # the running job: its own UI
    assert len(world.ui.requests) == 1 and world.other_ui.requests == []


def test_a_job_of_a_flow_staff_cannot_name_is_not_found(world: World):
    stella = world.client("staff")
    e = world.job.execution
    missing = (
        f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id + 1}/jobs/{world.job.job_name}/spark-ui/"
    )
    assert stella.get(missing).status_code == 404
    assert stella.get(world.base().replace(world.job.job_name, "no-such-job") + "/").status_code == 404
    assert world.reached() == []
