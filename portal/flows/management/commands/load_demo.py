"""`manage.py load_demo`: the embedded mode's demo — an admin, a topology, a
template pack, sample data and a flow — so `make run` shows a working portal —
and an ordinary user with something of their own to connect: a small shop
database on this machine's PostgreSQL when it answers, and sample files in
their own area always, so a newcomer's first flow needs nobody else.
Safe to run again: the same accounts, passwords, database and files.

The shop database and its role carry this portal's install id (made once into
var/), so two clones sharing one PostgreSQL server each get their own and
never re-key the other's: a node the first clone's newcomer registered keeps
connecting after a second clone's `load_demo`."""

from __future__ import annotations

import csv
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from psycopg import sql

from portal.accounts.access import Principal
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.templatepacks import services as packs
from portal.templatepacks.models import TemplatePack
from portal.topology import policy
from portal.topology.services import load_topology_file

logger = logging.getLogger(__name__)

DEMO_USER = "newcomer"
# The shop database the newcomer registers as their own node: a server, a database and an owner
# of its own, so the node they make reaches nothing of the portal's. Both are named
# SHOP_PREFIX + this portal's install id (`shop_name`): the newcomer's by the default
# USER_NODE_DATABASES ({user}_*), and another clone's never.
SHOP_PREFIX = f"{DEMO_USER}_shop_"
# Where load_demo may make that database: a server administrator's connection (PostgreSQL's
# own defaults on a developer machine). `--postgres ''` skips it.
DEFAULT_POSTGRES = os.environ.get("DEMO_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

DEMO_FLOW = {
    "flow_group": "demo",
    "flow_name": "orders-to-archive",
    "description": "Ingests the sample order files into the lake, then replicates them to the archive.",
    "schedule": "*/5 * * * *",
    # So the first `make run` shows a run at once, not after the next tick.
    "run_immediately": True,
    "source": "landing",
    "destinations": ["archive"],
    "template_uris": "pack://demo-pack/ingest/files.template",
    "properties": {"source.files.format": "csv"},
}


DEMO_PACK = "demo-pack"
# A Gobblin-style job template; the README's API example uses it.
DEMO_TEMPLATES = {
    "ingest/files.template": """\
# Ingest the files of the flow's source data node and publish them as Parquet.
gobblin.template.required_attributes = "source.files.format"
flowport.attribute.source.files.format.description = "Format of the source files: csv, json or parquet"
flowport.attribute.source.files.format.default = "csv"
writer.output.format = parquet
job.commit.policy = full
""",
}


def demo_admin_password() -> str:
    return kept_password("demo-admin-password")


def kept_password(name: str) -> str:
    """Made once and kept in var/ (mode 0600) so every `make run` can print it."""
    path = settings.VAR_DIR / name
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(12))
    return path.read_text().strip()


def install_id() -> str:
    """This portal's own id, made once into var/ (a clone, a var folder: one id), so what
    the demo makes outside the portal (a database, a role) is named after it and no
    other clone on the same server ever touches it."""
    path = settings.VAR_DIR / "install-id"
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # another load_demo made it meanwhile
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(4))
    return path.read_text().strip()


def shop_name(install: str) -> str:
    """The shop's database and role: `newcomer_shop_<install id>`."""
    return SHOP_PREFIX + install


def write_sample_orders(folder: Path, rows: int = 200) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "orders-0001.csv"
    if target.exists():
        return
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["order_id", "customer", "amount", "updated_at"])
        for n in range(1, rows + 1):
            writer.writerow(
                [n, f"customer-{n % 17}", f"{(n * 7919) % 1000 / 10:.2f}", f"2026-01-01T00:{n % 60:02d}:00"]
            )


@dataclass(frozen=True)
class ShopDatabase:
    """What the newcomer types into the node form."""

    url: str
    user: str
    password: str


def make_shop_database(admin_url: str, name: str, password: str, rows: int = 50) -> ShopDatabase | None:
    """The newcomer's own PostgreSQL database `name` (owned by a role of that name) with an
    `orders` table, made (or brought back to the same state) through `admin_url`; None when
    that server does not answer, so embedded defaults without PostgreSQL still get a demo
    (the files in the user's area)."""
    if not admin_url:
        return None
    try:
        return _make_shop_database(admin_url, name, password, rows)
    except psycopg.Error as error:
        logger.info("no demo shop database: %s", str(error).strip().splitlines()[0] if str(error) else error)
        return None


def _make_shop_database(admin_url: str, name: str, password: str, rows: int) -> ShopDatabase:
    with psycopg.connect(admin_url, connect_timeout=3, autocommit=True) as admin:
        role_exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone()
        # The role is this install's own (its id is in the name), and its password is the one kept
        # in this var/: setting it again changes nothing unless var/ lost it.
        verb = "ALTER" if role_exists else "CREATE"
        # The password is a literal in DDL (no bind parameters there); sql.Literal quotes it.
        admin.execute(
            sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(password))
        )
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(name))
            )
    parts = urlsplit(admin_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    shop_url = parts._replace(path=f"/{name}").geturl()
    with psycopg.connect(shop_url, connect_timeout=3, autocommit=True) as shop:
        shop.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(name)))
        shop.execute(
            "CREATE TABLE IF NOT EXISTS orders (order_id integer PRIMARY KEY, customer text NOT NULL,"
            " amount numeric(10, 2) NOT NULL, updated_at timestamp NOT NULL)"
        )
        shop.execute(
            "INSERT INTO orders SELECT n, 'customer-' || n %% 7, (n * 7919 %% 1000) / 10.0,"
            " timestamp '2026-01-01' + n * interval '1 hour' FROM generate_series(1, %s) AS n"
            " ON CONFLICT (order_id) DO NOTHING",
            [rows],
        )
    return ShopDatabase(url=f"jdbc:postgresql://{host}:{port}/{name}", user=name, password=password)


def asks_password(admin_url: str, shop: ShopDatabase) -> bool:
    """Does the server ask the shop's user for its password? A user-made node is refused where it
    does not (a trust line in pg_hba.conf; portal.pipeline.usernode)."""
    parts = urlsplit(admin_url)
    try:
        with psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            dbname=shop.url.rsplit("/", 1)[-1],
            user=shop.user,
            password=shop.password,
            connect_timeout=3,
        ) as conn:
            return bool(conn.pgconn.used_password)
    except psycopg.Error:
        return False


def load_pack(owner) -> None:
    """The demo template pack, made through the pack service so it is audited like any other."""

    if TemplatePack.objects.filter(name=DEMO_PACK).exists():
        return
    pack = packs.create_pack(user=owner, name=DEMO_PACK, description="Job templates of the demo.")
    for path, text in DEMO_TEMPLATES.items():
        packs.save_template(pack, user=owner, path=path, text=text)


class Command(BaseCommand):
    help = "Create the demo admin, topology, sample data and flow (idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--postgres",
            default=DEFAULT_POSTGRES,
            help="a PostgreSQL administrator's URL where the newcomer's shop database is made "
            "(DEMO_POSTGRES_URL; default %(default)s); '' for none",
        )

    def handle(self, *args, postgres: str, **options) -> None:
        password = demo_admin_password()
        user_model = get_user_model()
        with transaction.atomic():
            admin, created = user_model.objects.get_or_create(
                username="admin",
                defaults={"is_staff": True, "is_superuser": True, "email": "admin@localhost"},
            )
            if created:
                admin.set_password(password)
                admin.save()
        self._load_topology()
        load_pack(admin)
        write_sample_orders(settings.FLOWPORT_DATA_DIR / "landing" / "orders")
        if not FlowConfig.objects.filter(flow_group="demo", flow_name="orders-to-archive").exists():
            flow_services.create_flow(owner=admin, data=DEMO_FLOW)
        newcomer, newcomer_password = self._newcomer(user_model)
        area = self._newcomer_files(newcomer)
        shop = make_shop_database(postgres, shop_name(install_id()), kept_password("demo-shop-password"))
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
        note = "" if created else " (as set on first run; kept in var/demo-admin-password)"
        self.stdout.write(f"  Demo admin: admin / {password}{note}")
        self.stdout.write(
            f"  Demo user:  {DEMO_USER} / {newcomer_password}  (an ordinary user; README's tour: their first flow)"
        )
        if shop is not None:
            self.stdout.write(
                f"    their database: {shop.url}  (Database user {shop.user}, password {shop.password})"
            )
            if not asks_password(postgres, shop):
                self.stdout.write(
                    "    (this PostgreSQL lets that user in without its password, so a node a user makes is "
                    "refused there: have pg_hba.conf ask for one, scram-sha-256, or use their folder)"
                )
        if area is not None:
            self.stdout.write(f"    their folder: {area}  (sample orders in shop/orders/)")

    def _newcomer(self, user_model: Any) -> tuple[Any, str]:
        password = kept_password("demo-user-password")
        with transaction.atomic():
            user, created = user_model.objects.get_or_create(
                username=DEMO_USER, defaults={"email": f"{DEMO_USER}@localhost"}
            )
            if created:
                user.set_password(password)
                user.save()
        return user, password

    def _newcomer_files(self, user: Principal) -> str | None:
        """Sample orders in the newcomer's personal area (the policy's `users/{user}`), the
        source they can register when no PostgreSQL answers."""
        area = policy.personal_area(user)
        if area is None:
            return None
        # One sub-folder a dataset (source.files.dataset.level=1, the default): shop/orders/.
        write_sample_orders(settings.FLOWPORT_DATA_DIR / area / "shop" / "orders", rows=50)
        return area

    def _load_topology(self) -> None:
        path = getattr(settings, "TOPOLOGY_FILE", "") or str(
            Path(__file__).resolve().parents[3] / "topology" / "demo_topology.yaml"
        )
        summary = load_topology_file(path)
        self.stdout.write(f"  Topology from {path}: {summary}")
