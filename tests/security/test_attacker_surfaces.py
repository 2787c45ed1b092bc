"""What an attacker reaches without an account, and what an ordinary account reads of the server.

* Anonymous: the login page, and nothing else. Every route of the URL map — the apps' pages,
  the API, Rest.li, /metrics, the API's schema and docs, Django's admin — is asked with real rows
  behind its address, and answers with the login page (302 to it, or 401) or a refusal.
* /metrics and the API schema: signed-in users, Prometheus with its bearer token, or anyone only
  when the operator opens them.
* The Spark UI has no login: it is off by default and, when an operator turns it on, listens on
  the portal's address (loopback here), measured on the sockets of a real driver JVM; staff alone
  reach it, through the portal's proxy, while the job runs.
* A failure message quoting the server's paths and a Python traceback: the flow's owner (not
  staff) reads it without either, on the API, Rest.li and every page; staff read it whole.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from portal.accounts.tokens import create_token
from portal.monitoring.models import Subscription
from portal.orchestration.models import FlowExecution, JobExecution
from portal.orchestration.state import joblogs
from portal.topology.models import Capability, DataNode, SpecExecutor
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory
from tests.unit.templatepacks.factories import make_pack

REPO = Path(__file__).resolve().parents[2]
LAKE_ROOT = "/var/flowport/lake"
STAGED = f"{LAKE_ROOT}/sales/orders/_staging/part-0.parquet"
FRAME = '  File "/opt/flowport/portal/pipeline/task.py", line 212, in run'
TRACEBACK = (
    "Traceback (most recent call last):\n"
    f"{FRAME}\n"
    "    writer.write(batch)\n"
    '  File "/opt/flowport/.venv/lib/python3.11/site-packages/pyarrow/parquet.py", line 1020, in write\n'
    "    self.sink = open(path)\n"
    "                ^^^^^^^^^^\n"
    f"FileNotFoundError: [Errno 2] No such file or directory: '{STAGED}'"
)
JOB_MESSAGE = f"Task 0 of orders failed: FileNotFoundError: [Errno 2] No such file or directory: '{STAGED}'\n{TRACEBACK}"
EXECUTION_MESSAGE = f"Job sales.orders.1-landing-to-lake failed: {JOB_MESSAGE}"
DRIVER_TAIL = (
    "2026-03-01T12:00:02.000Z ERROR [Thread-3] Executor: Exception in task 0.0\n"
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/opt/flowport/.venv/lib/python3.11/site-packages/pyspark/worker.py", line 1800, in main\n'
    "    process()\n"
    "ValueError: bad row in file:/var/flowport/lake/sales/orders/in.csv\n"
    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:600)\n"
    "\tat org.apache.spark.scheduler.Task.run(Task.scala:147)\n"
)
# What the owner reads instead of the paths: each relative to its data node.
RELATIVE = "lake:sales/orders/_staging/part-0.parquet"


def assert_redacted(text: str) -> None:
    assert "/var/" not in text and "/opt/" not in text, text
    assert 'File "' not in text and "Traceback (most recent call last)" not in text, text
    assert "[traceback hidden]" in text, text


def assert_whole(text: str) -> None:
    assert FRAME in text and STAGED in text, text


# --- the world ------------------------------------------------------------------------------


@dataclass
class World:
    owner: Any
    outsider: Any
    staff: Any
    execution: FlowExecution
    job: JobExecution
    values: dict[str, str]


@pytest.fixture
def world(db, settings, tmp_path) -> World:
    """Olivia's flow sales/orders over the data node `lake`, whose run failed; a pack, an executor
    and a node all named `sales`, so every `<name>` of the URL map names a real row."""
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    owner = UserFactory(username="olivia")
    outsider = UserFactory(username="oscar")
    staff = UserFactory(username="stella", is_staff=True)
    DataNode.objects.create(name="lake", kind="files", properties={"path": LAKE_ROOT})
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    execution = FlowExecutionFactory(flow=flow, status="FAILED", message=EXECUTION_MESSAGE)
    job = JobExecutionFactory(
        execution=execution,
        job_name="sales.orders.1-landing-to-lake",
        status="FAILED",
        message=JOB_MESSAGE,
        log_excerpt=f"2026-03-01T12:00:01.000Z ERROR failed: {JOB_MESSAGE}\n",
        driver_log_excerpt=DRIVER_TAIL,
        spark_ui_url="http://127.0.0.1:4040",
    )
    pack = make_pack(owner, name="sales", templates={"ingest.template": "writer.output.format = parquet\n"})
    template = pack.current_version.templates.values_list("path", flat=True).first()
    executor = SpecExecutor.objects.create(name="sales")
    node = DataNode.objects.create(name="sales")
    capability = Capability.objects.create(
        executor=executor, source=node, destination=DataNode.objects.get(name="lake")
    )
    token, _key = create_token(owner, name="script")
    subscription = Subscription.objects.create(user=owner, flow=flow)
    values = {
        "flow_group": "sales",
        "flowGroup": "sales",
        "flow_name": "orders",
        "flowName": "orders",
        "execution_id": str(execution.execution_id),
        "executionId": str(execution.execution_id),
        "job_name": job.job_name,
        "name": "sales",
        "path": str(template),
        "template_path": str(template),
        "number": "1",
        "pk": str(capability.pk),
        "token_id": str(token.pk),
        "subscription_id": str(subscription.pk),
        "request_id": "1",
        "dataset_urn": "orders",
        "key": f"(flowExecutionId:{execution.execution_id},flowGroup:sales,flowName:orders)",
        "app_label": "flows",
        "url": "nothing-here/",
    }
    return World(owner, outsider, staff, execution, job, values)


# --- anonymous visitors ---------------------------------------------------------------------

# Whoever reaches the portal may open these: the way in, and the icon its pages point at.
OPEN_TO_ANYONE = {"login/", "favicon.ico"}


def routes() -> Iterator[tuple[str, URLPattern]]:
    """Every route of the URL map (the apps', the API's, Rest.li's and Django's admin)."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern

    yield from walk(get_resolver().url_patterns, "")


def sample_url(route: str, values: dict[str, str]) -> str:
    """The route's address with the world's rows in it (a regular expression route too)."""
    url = re.sub(r"\(\?P<(\w+)>[^()]*\)", lambda m: values[m[1]], route)
    # Django's admin names rows of its own (content types, objects): the first of each.
    url = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: values.get(m[2], "1" if m[1] == "int" else "sales"), url)
    url = url.replace("^", "").replace("$", "").replace("/?", "/").replace("\\(", "(").replace("\\)", ")")
    return "/" + url


def anonymous_answer(url: str) -> tuple[int, str]:
    """Where an anonymous visitor ends up, redirects followed: the final status and page."""
    client = Client()
    response = client.get(url, HTTP_ACCEPT="text/html,application/json", follow=True)
    if response.status_code == 405:  # a POST-only route
        response = client.post(url, {}, follow=True)
    return response.status_code, response.request["PATH_INFO"]


def test_the_url_map_is_walked_whole(world: World):
    """The walk below reaches every route at an address of its own (none is shadowed by another)."""
    walked = list(routes())
    assert len(walked) > 100
    for route, _pattern in walked:
        url = sample_url(route, world.values)
        assert resolve(url).route.replace("^", "") == route.replace("^", ""), url


def test_an_anonymous_visitor_gets_only_the_login_page(world: World):
    """Asked with real rows behind every address, each route ends on the login page (redirects
    followed) or answers 401 (the API asks for credentials), 403 or 404: nothing a visitor without
    an account may read."""
    reached = {}
    for route, _pattern in routes():
        if route in OPEN_TO_ANYONE:
            continue
        url = sample_url(route, world.values)
        status, page = anonymous_answer(url)
        if not ((status, page) == (200, "/login/") or status in (401, 403, 404)):
            reached[url] = (status, page)
    assert reached == {}


def test_the_admins_login_page_is_the_portals(world: World):
    """Django's admin has no login form of its own for a visitor: one way in."""
    response = Client().get("/admin/login/")
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=/admin/login/")
    assert anonymous_answer("/admin/") == (200, "/login/")


def test_the_login_page_opens_to_anyone(world: World):
    assert Client().get("/login/").status_code == 200
    assert Client().get("/").status_code == 302 and Client().get("/")["Location"] == "/login/?next=/"


# --- /metrics and the API schema ------------------------------------------------------------


@pytest.mark.parametrize("url", ["/metrics", "/monitoring/metrics"])
def test_metrics_answer_a_sign_in_or_the_scrapers_token(world: World, settings, url: str):
    settings.MONITORING_METRICS_TOKEN = "scrape-me"
    anonymous = Client().get(url)
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"flowport_" not in anonymous.content
    assert Client().get(url, headers={"Authorization": "Bearer guessed"}).status_code == 401
    assert Client().get(url, headers={"Authorization": "Bearer scrape-me"}).status_code == 200
    signed_in = Client()
    signed_in.force_login(world.outsider)
    assert b"flowport_flow_executions" in signed_in.get(url).content


def test_metrics_without_a_token_configured_stay_closed_unless_the_operator_opens_them(
    world: World, settings
):
    settings.MONITORING_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    settings.MONITORING_METRICS_PUBLIC = True
    assert Client().get("/metrics").status_code == 200


def test_the_api_schema_and_docs_are_for_signed_in_users_unless_the_operator_opens_them(
    world: World, settings
):
    assert Client().get("/api/schema/").status_code == 401
    docs = Client().get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"] == "/login/?next=/api/docs/"
    _token, key = create_token(world.outsider, name="docs")
    assert Client().get("/api/schema/", headers={"Authorization": f"Token {key}"}).status_code == 200
    browser = Client()
    browser.force_login(world.outsider)
    assert browser.get("/api/docs/").status_code == 200
    settings.API_SCHEMA_PUBLIC = True
    assert Client().get("/api/schema/").status_code == 200
    assert Client().get("/api/docs/").status_code == 200


# --- the Spark UI ---------------------------------------------------------------------------

DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from portal.pipeline.spark.session import get_or_create_spark
    spark = get_or_create_spark("local[1]", "surfaces")
    print(json.dumps({"ui": spark.sparkContext.uiWebUrl}), flush=True)
    sys.stdin.read()  # until the test has read the sockets
    spark.stop()
    """
)


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it (32-bit words in host byte order)."""
    words = [bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8)]
    raw = b"".join(words)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw)
    v6 = ipaddress.IPv6Address(raw)
    return v6.ipv4_mapped or v6


def listening(pids: set[int]) -> dict[int, ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The TCP ports these processes listen on, with the address each is bound to."""
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                ports[int(port, 16)] = _address(address)
    return ports


def children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def start_driver(**environment: str) -> subprocess.Popen[str]:
    """A worker's driver of its own (a JVM reads its environment when it starts)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_LOCAL_IP", "SPARK_UI_ENABLED", "SPARK_UI_HOST", "FLOWPORT_BIND")
    }
    env.update(environment, PYTHONPATH=str(REPO), SPARK_LOG_LEVEL="ERROR")
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        env=env,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def read_driver(process: subprocess.Popen[str]) -> tuple[str | None, dict[int, Any]]:
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line, "the driver did not start"
        ui = json.loads(line)["ui"]
        return ui, listening(children(process.pid))
    finally:
        process.communicate("", timeout=120)


def test_a_workers_spark_ui_is_off_or_listens_where_the_portal_does():
    """Two real local drivers. By default there is no UI; with SPARK_UI_ENABLED it listens on the
    portal's address (FLOWPORT_BIND, loopback here), not on every interface — and no port of a
    local driver (RPC, block manager) is on the machine's other addresses either."""
    default = start_driver()
    enabled = start_driver(SPARK_UI_ENABLED="true", FLOWPORT_BIND="127.0.0.1:8000")
    ui, ports = read_driver(default)
    assert ui is None
    assert ports and all(address.is_loopback for address in ports.values()), ports

    ui, ports = read_driver(enabled)
    assert ui is not None
    ui_port = int(ui.rsplit(":", 1)[1])
    assert ui_port in ports, (ui, ports)
    assert not ports[ui_port].is_unspecified
    assert ports[ui_port] == ipaddress.IPv4Address("127.0.0.1")
    assert all(address.is_loopback for address in ports.values()), ports


def _execution_page(user: Any, world: World) -> str:
    client = Client()
    client.force_login(user)
    e = world.execution
    return client.get(f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/").content.decode()


def test_the_spark_ui_is_linked_for_staff_through_the_portal_while_the_job_runs(world: World):
    """Oscar may read Olivia's execution, and Olivia owns it, but the worker's UI would show either
    of them every job that worker ran: neither gets a link or its address. Staff get the portal's
    proxy while the job runs, never the bare port (tests/security/test_spark_ui_proxy.py)."""
    url = f"/api/flowexecutions/{world.execution.execution_id}"
    e, job = world.execution, world.job
    proxy = f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/jobs/{job.job_name}/spark-ui/"
    for user in (world.owner, world.outsider, world.staff):  # the job failed: no UI to reach
        assert "127.0.0.1:4040" not in _execution_page(user, world)
        assert api_client_for(user).get(url).json()["jobStatuses"][0]["sparkUiUrl"] == ""
    JobExecution.objects.filter(pk=job.pk).update(status="RUNNING")
    for user in (world.owner, world.outsider):
        assert "127.0.0.1:4040" not in _execution_page(user, world)
        assert proxy not in _execution_page(user, world)
        assert api_client_for(user).get(url).json()["jobStatuses"][0]["sparkUiUrl"] == ""
    page = _execution_page(world.staff, world)
    assert f'href="{proxy}"' in page and "127.0.0.1:4040" not in page
    assert api_client_for(world.staff).get(url).json()["jobStatuses"][0]["sparkUiUrl"] == (
        f"http://testserver{proxy}"
    )


# --- failure messages -----------------------------------------------------------------------


def api_texts(user: Any, world: World) -> list[str]:
    """Every message and log tail of the failed run, as the API and Rest.li give them to `user`."""
    api = api_client_for(user)
    e = world.execution
    one = api.get(f"/api/flowexecutions/{e.execution_id}").json()
    listed = api.get("/api/flowexecutions").json()["results"][0]
    latest = api.get("/api/flowstatuses/sales/orders").json()
    restli = Client()
    restli.force_login(user)
    record = restli.get(
        f"/flowexecutions/(flowExecutionId:{e.execution_id},flowGroup:sales,flowName:orders)",
        HTTP_X_RESTLI_PROTOCOL_VERSION="2.0.0",
    ).json()
    texts = [one["message"], listed["message"], latest["message"], record["message"]]
    for status in (one, latest):
        job = status["jobStatuses"][0]
        texts += [job["message"], job["logExcerpt"], job["driverLogExcerpt"]]
    texts += [record["jobStatuses"][0]["message"], *(issue["details"] for issue in record["issues"])]
    return texts


def test_the_owner_reads_the_failure_on_the_api_without_server_paths_or_tracebacks(world: World):
    texts = api_texts(world.owner, world)
    for text in texts:
        assert_redacted(text)
    job_message = texts[4]
    assert RELATIVE in job_message
    assert f"FileNotFoundError: [Errno 2] No such file or directory: '{RELATIVE}'" in job_message
    assert "ValueError: bad row in lake:sales/orders/in.csv" in texts[6]
    assert "\tat org.apache" not in texts[6] and "[stack frames hidden]" in texts[6]


def test_staff_read_the_failure_on_the_api_whole(world: World):
    texts = api_texts(world.staff, world)
    for text in [*texts[:5], texts[7]]:
        assert_whole(text)
    assert "\tat org.apache.spark.scheduler.Task.run" in texts[6]


def write_worker_log(world: World) -> Path:
    path = joblogs.log_path(world.execution.execution_id, world.job.job_name, world.job.attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "2026-03-01T12:00:00.000Z INFO attempt 1 on w1\n"
        f"2026-03-01T12:00:01.000Z ERROR failed: {JOB_MESSAGE}\n"
    )
    return path


def pages(user: Any, world: World) -> dict[str, str]:
    """Every page that shows the failure (and the worker log page and download), as `user` reads them."""
    client = Client()
    client.force_login(user)
    e = world.execution
    base = f"/executions/sales/orders/{e.execution_id}"
    log = f"{base}/jobs/{world.job.job_name}/log/"
    download = client.get(f"{base}/jobs/{world.job.job_name}/log/download/?log=worker")
    return {
        "execution": client.get(f"{base}/").content.decode(),
        "executions": client.get("/executions/").content.decode(),
        "flow executions": client.get("/executions/sales/orders/").content.decode(),
        "dashboard": client.get("/monitoring/", headers={"HX-Request": "true"}).content.decode(),
        "log": client.get(log).content.decode(),
        "log errors": client.get(f"{log}?level=ERROR").content.decode(),
        "download": b"".join(
            download.streaming_content if download.streaming else [download.content]
        ).decode(),
    }


def test_the_owner_reads_the_failure_on_every_page_without_server_paths_or_tracebacks(world: World):
    write_worker_log(world)
    for name, html in pages(world.owner, world).items():
        assert "/var/flowport" not in html and "/opt/flowport" not in html, name
        assert "File &quot;" not in html and 'File "' not in html, name
        assert "most recent call last" not in html, name
    seen = pages(world.owner, world)
    assert RELATIVE in seen["execution"] and "[traceback hidden]" in seen["execution"]
    assert "[traceback hidden]" in seen["log"] and "[traceback hidden]" in seen["download"]
    assert f"No such file or directory: &#x27;{RELATIVE}&#x27;" in seen["log"]


def test_staff_read_the_failure_on_every_page_whole(world: World):
    write_worker_log(world)
    seen = pages(world.staff, world)
    for name in ("execution", "log", "log errors", "download"):
        assert "/opt/flowport/portal/pipeline/task.py" in seen[name], name
    assert STAGED in seen["download"] and FRAME in seen["download"]
