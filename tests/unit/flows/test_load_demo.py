"""`manage.py load_demo` gives a new user a portal that works at once: the demo
flow compiles through the demo template pack, the README's API example (which
names that pack's template) is accepted, and the printed newcomer can register
the printed database (made on this machine's PostgreSQL) or their sample files
as nodes of their own and see the orders in them."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from psycopg import sql
from rest_framework.test import APIClient

from portal.flows.management.commands.load_demo import DEFAULT_POSTGRES, SHOP_PREFIX
from portal.flows.models import FlowConfig
from portal.templatepacks.models import PackAuditEvent, TemplatePack
from portal.topology import connections
from portal.topology import services as topology
from tests.pg_logical import private_server

pytestmark = pytest.mark.django_db


NO_POSTGRES = "postgresql://postgres@127.0.0.1:1/postgres"  # nothing listens on port 1


def load_demo(*args: str) -> str:
    out = io.StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def drop_shop_databases(var_dirs: list[Path]) -> None:
    """What load_demo made on the machine's PostgreSQL for these var folders (each test's own)."""
    ids = [(var / "install-id").read_text().strip() for var in var_dirs if (var / "install-id").exists()]
    with psycopg.connect(DEFAULT_POSTGRES, autocommit=True) as admin:
        for name in (SHOP_PREFIX + install for install in ids):
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def var_dirs(tmp_path) -> Iterator[list[Path]]:
    """Var folders of "clones" of the portal; their shop databases are dropped after the test."""
    made: list[Path] = []
    yield made
    drop_shop_databases(made)


def use_var(settings, var_dirs: list[Path], var: Path) -> None:
    var.mkdir(parents=True, exist_ok=True)
    var_dirs.append(var)
    settings.VAR_DIR = var
    settings.FLOWPORT_DATA_DIR = var / "data"


@pytest.fixture
def demo(settings, tmp_path, var_dirs) -> str:
    use_var(settings, var_dirs, tmp_path / "var")
    return load_demo()


def register_shop(output: str, name: str, owner=None):
    """The newcomer registers the printed database as a node of their own."""
    newcomer = owner or authenticate(
        username="newcomer", password=printed(r"Demo user: +newcomer / (\S+)", output)
    )
    return topology.create_data_node(
        {
            "name": name,
            "kind": "jdbc",
            "properties": {
                "url": printed(r"their database: (jdbc:postgresql://\S+)", output),
                "user": printed(r"Database user (\S+),", output),
            },
            "secrets": {"password": printed(r"password (\S+)\)", output)},
        },
        user=newcomer,
    )


@pytest.fixture(scope="module")
def password_pg() -> Iterator[str]:
    """A PostgreSQL server that asks every login for its password (a user-made node is refused on
    one that trusts this machine, as this machine's own does)."""
    with private_server(password=True) as url:
        yield url.replace("postgres://", "postgresql://")


@pytest.fixture
def asks_passwords(settings, password_pg) -> str:
    settings.USER_NODE_DATABASE_HOSTS = ["127.0.0.1"]  # the private server's port
    return password_pg


def printed(pattern: str, output: str) -> str:
    found = re.search(pattern, output)
    assert found, f"{pattern!r} not in:\n{output}"
    return found.group(1)


def test_the_newcomer_registers_the_printed_database_and_sees_its_orders(
    settings, tmp_path, var_dirs, asks_passwords
):
    use_var(settings, var_dirs, tmp_path / "var")
    demo = load_demo("--postgres", asks_passwords)
    assert "without its password" not in demo
    password = printed(r"Demo user: +newcomer / (\S+)", demo)
    newcomer = authenticate(username="newcomer", password=password)
    assert newcomer is not None and not newcomer.is_staff

    node = register_shop(demo, "my-shop")

    assert node.properties["password"].startswith("ENC(")
    assert connections.test_connection(node).ok
    found = connections.discover(node)
    assert found.ok, found.message
    (orders,) = [d for d in found.datasets if d.name.endswith("orders")]
    assert [c.name for c in orders.columns if c.key_position] == ["order_id"]
    assert any(c.name == "updated_at" and c.watermark_suitable for c in orders.columns)


def test_a_second_clone_on_the_same_server_leaves_the_first_ones_database_alone(
    settings, tmp_path, var_dirs, asks_passwords
):
    use_var(settings, var_dirs, tmp_path / "first")
    first = load_demo("--postgres", asks_passwords)
    node = register_shop(first, "first-shop")
    assert connections.test_connection(node).ok

    use_var(settings, var_dirs, tmp_path / "second")  # another clone's var folder, same PostgreSQL
    second = load_demo("--postgres", asks_passwords)

    database = printed(r"their database: jdbc:postgresql://[^/]+/(\S+)", first)
    assert database.startswith(SHOP_PREFIX) and database == printed(r"Database user (\S+),", first)
    assert printed(r"their database: (\S+)", second) != printed(r"their database: (\S+)", first)
    settings.VAR_DIR, settings.FLOWPORT_DATA_DIR = var_dirs[0], var_dirs[0] / "data"  # the first clone's keys
    assert connections.test_connection(node).ok, "the second clone re-keyed the first one's database"


def test_on_a_server_trusting_this_machine_the_demo_says_the_newcomers_node_is_refused(demo):
    """This machine's PostgreSQL lets every login in from 127.0.0.1 without a password."""
    assert "lets that user in without its password" in demo


def test_without_postgresql_the_newcomer_gets_sample_files_in_their_own_area(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    output = load_demo("--postgres", NO_POSTGRES)

    assert "their database" not in output
    area = printed(r"their folder: (\S+)", output)
    newcomer = authenticate(username="newcomer", password=printed(r"newcomer / (\S+)", output))
    node = topology.create_data_node(
        {"name": "my-orders", "kind": "files", "properties": {"path": f"{area}/shop"}}, user=newcomer
    )
    found = connections.discover(node)
    assert found.ok, found.message
    (orders,) = found.datasets
    assert [c.name for c in orders.columns] == ["order_id", "customer", "amount", "updated_at"]
    # one sub-folder a dataset, as a flow over the node reads it (a file at the root is none)
    assert orders.name.startswith("orders"), orders.name
    assert (settings.FLOWPORT_DATA_DIR / area / "shop" / "orders" / "orders-0001.csv").is_file()


def test_the_demo_flow_compiles_through_the_demo_pack(demo):
    flow = FlowConfig.objects.get(flow_group="demo", flow_name="orders-to-archive")
    assert flow.template_uris == "pack://demo-pack/ingest/files.template"
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    pack = TemplatePack.objects.get(name="demo-pack")
    assert set(pack.current_version.templates.values_list("path", flat=True)) == {"ingest/files.template"}
    assert PackAuditEvent.objects.filter(pack_name="demo-pack").count() == 2  # created, template added


def test_loading_the_demo_twice_changes_nothing(demo):
    again = load_demo()
    assert TemplatePack.objects.get(name="demo-pack").versions.count() == 1
    assert FlowConfig.objects.count() == 1
    for line in ("Demo user:", "their database:", "their folder:"):
        assert [x for x in demo.splitlines() if line in x] == [x for x in again.splitlines() if line in x]


def test_the_readmes_api_example_is_accepted(demo):
    api = APIClient()
    api.force_authenticate(FlowConfig.objects.get().owner)
    example = {
        "flowGroup": "mygroup",
        "flowName": "myflow1",
        "schedule": "0 */6 * * *",
        "templateUris": "pack://demo-pack/ingest/files.template",
        "source": "landing",
        "destinations": ["archive"],
        "properties": {"source.files.format": "csv"},
    }
    created = api.post("/api/flowconfigs", example, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["compilation"]["status"] == "COMPILED"
