"""`manage.py load_demo`: the embedded mode's demo — an admin, a topology, a
template pack, sample data and a flow — so `make run` shows a working portal.
Safe to run again."""

from __future__ import annotations

import csv
import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.templatepacks import services as packs
from portal.templatepacks.models import TemplatePack
from portal.topology.services import load_topology_file

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
    """Made once and kept in var/ (mode 0600) so every `make run` can print it."""
    path = settings.VAR_DIR / "demo-admin-password"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(12))
    return path.read_text().strip()


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


def load_pack(owner) -> None:
    """The demo template pack, made through the pack service so it is audited like any other."""

    if TemplatePack.objects.filter(name=DEMO_PACK).exists():
        return
    pack = packs.create_pack(user=owner, name=DEMO_PACK, description="Job templates of the demo.")
    for path, text in DEMO_TEMPLATES.items():
        packs.save_template(pack, user=owner, path=path, text=text)


class Command(BaseCommand):
    help = "Create the demo admin, topology, sample data and flow (idempotent)."

    def handle(self, *args, **options) -> None:
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
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
        note = "" if created else " (as set on first run; kept in var/demo-admin-password)"
        self.stdout.write(f"  Demo admin: admin / {password}{note}")

    def _load_topology(self) -> None:
        path = getattr(settings, "TOPOLOGY_FILE", "") or str(
            Path(__file__).resolve().parents[3] / "topology" / "demo_topology.yaml"
        )
        summary = load_topology_file(path)
        self.stdout.write(f"  Topology from {path}: {summary}")
