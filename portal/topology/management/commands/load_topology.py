"""`manage.py load_topology [path]`: sync the topology file (TOPOLOGY_FILE by default)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.topology.services import load_topology_file
from portal.topology.topologyfile import TopologyFileError


class Command(BaseCommand):
    help = "Create or update data nodes, executors and capabilities from a YAML/HOCON topology file."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", nargs="?", default="", help="Defaults to the TOPOLOGY_FILE setting.")

    def handle(self, *args, path: str = "", **options) -> None:
        path = path or getattr(settings, "TOPOLOGY_FILE", "")
        if not path:
            raise CommandError("No topology file: pass a path or set TOPOLOGY_FILE.")
        try:
            summary = load_topology_file(path)
        except TopologyFileError as error:
            raise CommandError(f"Topology file has errors:\n{error}") from None
        self.stdout.write(
            "Topology {path}: {created} created, {updated} updated, {unchanged} unchanged, {removed} removed.".format(
                path=path, **summary
            )
        )
