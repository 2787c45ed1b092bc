"""Self-service data nodes in a real browser: a user an administrator has just
created signs in, registers their own PostgreSQL database, tests and discovers it, registers a
folder in their own area, makes a flow from one into the other, runs it, watches it commit and
reads the result, without anyone else doing anything. Another user sees the node but not its
credentials, may not use it, asks for access; the owner grants it from the node's page; then
they can."""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, BrowserContext, Page, expect
from psycopg import sql

from portal.orchestration.models import FlowExecution
from portal.topology import services as topology
from portal.topology.models import DataNode
from tests.builders.queues import E2E_INGEST_QUEUE as INGEST_QUEUE
from tests.e2e import ui
from tests.integration.stack import ROOT, VENV_BIN
from tests.pg_logical import private_server

pytestmark = pytest.mark.django_db(transaction=True)

ORDERS = 12


@dataclass(frozen=True)
class Shop:
    """What the user types into the node form: their database, its role and password."""

    url: str
    user: str
    password: str


@pytest.fixture(scope="module")
def password_pg() -> Iterator[str]:
    """A PostgreSQL server that asks every login for its password: a user's node must log in
    with its own (this machine's server trusts 127.0.0.1, where every user-made node is refused)."""
    with private_server(password=True) as url:
        yield url.rsplit("/", 1)[0]


@pytest.fixture
def shop_database(password_pg) -> Iterator[Callable[[str], Shop]]:
    """A database of a user's own (named after them, as USER_NODE_DATABASES wants) owned by a
    role of its own with a password: `orders`, 12 rows."""
    made: list[str] = []

    def make(username: str) -> Shop:
        name = f"{username}_shop_{secrets.token_hex(4)}"
        password = f"shop-{secrets.token_hex(6)}"
        made.append(name)
        with psycopg.connect(f"{password_pg}/postgres", autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(name))
            )
        host_port = password_pg.rsplit("@", 1)[1]
        with psycopg.connect(f"postgresql://{name}:{password}@{host_port}/{name}", autocommit=True) as shop:
            shop.execute(
                "CREATE TABLE orders (order_id integer PRIMARY KEY, customer text, amount numeric(8, 2),"
                " updated_at timestamp)"
            )
            shop.execute(
                "INSERT INTO orders SELECT n, 'customer-' || n, n * 1.5, timestamp '2026-01-01' + n * interval '1 day'"
                " FROM generate_series(1, %s) AS n",
                [ORDERS],
            )
        return Shop(f"jdbc:postgresql://{host_port}/{name}", name, password)

    yield make
    with psycopg.connect(f"{password_pg}/postgres", autocommit=True) as admin:
        for name in made:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def self_service_executor() -> None:
    """The administrators' routing policy: an executor (its queue has a worker) that serves
    users' own databases and folders as sources and their folders as destinations."""
    topology.create_executor(
        {
            "name": "self-service",
            "technology": "spark-local",
            "spark_master": "local[2]",
            "queue": INGEST_QUEUE,
            "user_sources": "jdbc,files",
            "user_destinations": "files",
        }
    )


@pytest.fixture
def data_dir(stack_env) -> Path:
    """The web's and the worker's data directory (users' areas are under it)."""
    return Path(stack_env["FLOWPORT_VAR_DIR"]) / "data"


@pytest.fixture
def new_local_user(stack_env) -> Callable[[str], str]:
    """An administrator's `manage.py add_user NAME` (an ordinary local account, the portal's
    own password hasher): nothing more is done for the user. Returns the password."""

    def add_user(username: str) -> str:
        password = secrets.token_urlsafe(12)
        subprocess.run(
            [str(VENV_BIN / "python"), "manage.py", "add_user", username],
            input=password,
            text=True,
            env=stack_env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=120,
        )
        assert not get_user_model().objects.get(username=username).is_staff
        return password

    return add_user


@pytest.fixture
def sign_in(browser: Browser, stack: str) -> Iterator[Callable[..., Page]]:
    """A browser of each user's own (two people at two machines), closed after the test."""
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    def open_as(username: str, password: str, *, width: int = 1280) -> Page:
        context = browser.new_context(base_url=stack, viewport={"width": width, "height": 900})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        ui.log_in(page, username, password)
        return page

    yield open_as
    for context in contexts:
        context.close()
    assert not errors, f"script errors in the pages: {errors}"


def register_database(page: Page, name: str, shop: Shop) -> None:
    page.goto("/topology/datanodes/new/")
    expect(page.locator("#node-policy")).to_contain_text("A data node of your own")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Kind").select_option("jdbc")
    ui.htmx_idle(page)
    page.get_by_label("JDBC URL").fill(shop.url)
    page.get_by_label("Database user").fill(shop.user)
    page.get_by_label("Password").fill(shop.password)
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text(f"{name} saved")


def test_a_new_user_gets_from_login_to_a_committed_flow_from_their_own_database(
    page, new_local_user, data_dir, shop_database, self_service_executor, axe_source
):
    password = new_local_user("newcomer")
    ui.log_in(page, "newcomer", password)

    # Their database, typed into the form, tested and discovered.
    shop = shop_database("newcomer")
    db_password = shop.password
    register_database(page, "my-shop", shop)
    page.goto("/topology/datanodes/my-shop/")
    expect(page.locator("#node-access")).to_contain_text("newcomer")
    assert db_password not in page.content()
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection works")
    page.get_by_role("button", name="Discover tables and files").click()
    orders = page.locator("details[data-dataset='public.orders']")
    expect(orders.locator("tr", has_text="order_id")).to_contain_text("integer")
    ui.screenshot(page, "self-service-node")
    violations = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)

    # A folder of their own to publish into: the form suggests their area.
    page.goto("/topology/datanodes/new/")
    page.get_by_label("Name").fill("my-folder")
    page.get_by_label("Kind").select_option("files")
    ui.htmx_idle(page)
    expect(page.get_by_label("Root folder")).to_have_attribute("placeholder", "users/newcomer")
    page.get_by_label("Root folder").fill("users/newcomer/orders-copy")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("my-folder saved")

    # The flow: the table picked from the source, no schedule (runs once, as soon as saved).
    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("mine")
    page.locator("#id_flow_name").fill("first-flow")
    page.locator("#id_source").select_option("my-shop")
    page.locator("#id_destination-my-folder").check()
    page.get_by_role("button", name="Pick a table and columns from the source…").click()
    ui.htmx_idle(page)
    page.get_by_label("Table", exact=True).select_option("public.orders")
    page.get_by_label("Watermark column").select_option("updated_at")
    ui.screenshot(page, "self-service-flow-form")
    ui.htmx_idle(page)
    page.locator("#save-flow").click()
    expect(page).to_have_url(re.compile(r"/flows/mine/first-flow/$"))
    expect(page.locator(".badge.compiled").first).to_be_visible()

    # Saved without a schedule, it has started already: its run is on the flow's page.
    runs = page.locator("#flow-executions tbody tr")
    expect(runs).to_have_count(1, timeout=30_000)
    runs.first.locator("a").first.click()
    expect(page).to_have_url(re.compile(r"/executions/mine/first-flow/\d+/$"))
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("COMMITTED", timeout=180_000)
    execution = FlowExecution.objects.get(flow__flow_name="first-flow")
    assert execution.flow.owner.username == "newcomer"
    ui.screenshot(page, "self-service-committed")

    # Where the data went (the folder inside their node, never the server's path) and its rows.
    went = page.locator('[data-test="output"]')
    expect(went.locator('[data-test="output-where"]')).to_contain_text("folder mine/first-flow/")
    expect(went.locator('td[data-label="Records"]')).to_have_text(str(ORDERS))
    assert str(data_dir) not in page.content()
    went.get_by_role("link", name=re.compile("Preview the first rows")).click()
    expect(page.locator('[data-test="preview-rows"] tbody tr')).to_have_count(ORDERS)
    expect(page.locator('[data-test="preview-rows"] thead')).to_contain_text("order_id")
    ui.screenshot(page, "self-service-preview")

    # The result, read in their folder's page.
    page.goto("/topology/datanodes/my-folder/")
    page.get_by_role("button", name="Discover tables and files").click()
    expect(page.locator("#discovery-summary")).to_contain_text("data file(s)")
    expect(page.locator("#discovery")).to_contain_text("order_id")
    ui.screenshot(page, "self-service-result")
    published = (data_dir / "users" / "newcomer" / "orders-copy").rglob("*.parquet")
    assert sum(pq.read_table(path).num_rows for path in published) == ORDERS

    page.set_viewport_size({"width": 375, "height": 800})
    page.goto("/topology/datanodes/my-shop/")
    ui.screenshot(page, "self-service-node-375")


def test_another_user_neither_sees_the_credentials_nor_uses_the_node_until_the_owner_grants_it(
    sign_in, new_local_user, stack, shop_database, self_service_executor, axe_source
):
    owner_password = new_local_user("owner")
    peer_password = new_local_user("peer")
    owner = sign_in("owner", owner_password)
    shop = shop_database("owner")
    db_password = shop.password
    register_database(owner, "owners-shop", shop)
    sealed = DataNode.objects.get(name="owners-shop").properties["password"]
    assert sealed.startswith("ENC(")

    peer = sign_in("peer", peer_password, width=375)
    response = peer.goto("/topology/datanodes/owners-shop/")
    assert response is not None and response.status == 200
    content = peer.content()
    assert db_password not in content and sealed not in content
    expect(peer.get_by_role("button", name="Test connection")).to_have_count(0)
    expect(peer.locator("#node-access")).to_contain_text("owner")
    ui.screenshot(peer, "self-service-request-access-375")
    violations = [v for v in ui.run_axe(peer, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)
    peer.goto("/flows/new/")
    expect(peer.locator("#id_source option[value='owners-shop']")).to_have_count(0)
    test = peer.request.post(
        "/topology/datanodes/owners-shop/test/",
        form={"csrfmiddlewaretoken": csrf_token(peer)},
        headers={"Referer": stack + "/flows/new/"},
    )
    assert test.status in (403, 404), test.status

    peer.goto("/topology/datanodes/owners-shop/")
    peer.locator("#request-role").select_option("read")
    peer.get_by_label("Why (optional)").fill("To copy the orders into my folder")
    peer.get_by_role("button", name="Request access").click()
    expect(peer.locator(".messages")).to_be_visible()

    owner.goto("/topology/datanodes/owners-shop/")
    requests_card = owner.locator("#access-requests")
    expect(requests_card).to_contain_text("peer")
    expect(requests_card).to_contain_text("To copy the orders into my folder")
    ui.screenshot(owner, "self-service-owner-answers")
    requests_card.get_by_role("button", name="Grant peer read access").click()
    expect(owner.locator("#node-access")).to_contain_text("peer")

    peer.goto("/topology/datanodes/owners-shop/")
    content = peer.content()
    assert db_password not in content and sealed not in content  # granted use, still no credentials
    peer.get_by_role("button", name="Test connection").click()
    expect(peer.locator("#connection-verdict")).to_contain_text("Connection works")
    ui.screenshot(peer, "self-service-granted-375")
    peer.goto("/flows/new/")
    expect(peer.locator("#id_source option[value='owners-shop']")).to_have_count(1)


def csrf_token(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
