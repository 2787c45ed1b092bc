"""`manage.py ensure_master_key`: make sure the portal has a usable master key."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from portal.crypto.errors import MasterKeyError
from portal.crypto.master import create_ring_file, get_ring, key_source, read_ring_file


class Command(BaseCommand):
    requires_system_checks = []  # it is what fixes the keys.E004 check
    help = (
        "Create the master key file (mode 0600) when there is none — $FLOWPORT_VAR_DIR/master-key in "
        "embedded mode, or FLOWPORT_MASTER_KEY_FILE — and check the configured key. Never prints a key."
    )

    def handle(self, *args, **options) -> None:
        try:
            source = key_source()
            if source.kind == "env":
                ring = get_ring()
                self.stdout.write(
                    f"Master key from FLOWPORT_MASTER_KEY (active {ring.active_id}); nothing to do."
                )
                return
            assert source.path is not None
            if source.path.exists():
                ring, created = read_ring_file(source.path), False
            else:
                ring, created = create_ring_file(source.path)
        except MasterKeyError as error:
            raise CommandError(str(error)) from None
        verb = "Created" if created else "Using"
        self.stdout.write(
            f"{verb} master key file {source.path}: active key {ring.active_id} "
            f"(fingerprint {ring.fingerprint(ring.active_id)}), {len(ring.keys)} key(s)."
        )
