"""`manage.py rotate_master_key`: a new master key; everything re-wrapped with it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from portal.crypto.errors import MasterKeyError
from portal.keys.rotation import rotate_master_key


class Command(BaseCommand):
    help = (
        "Add a new master key to the key file and make it active, then re-wrap every stored customer "
        "key and every flow's encrypt.wrapped.key with it (ENC values are not touched). Old master keys "
        "stay in the file to unwrap until --remove-old. Run one rotation at a time."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--remove-old",
            action="store_true",
            help="Afterwards, remove the old master keys nothing is wrapped with any more "
            "(only once no running execution still carries an old wrapped key).",
        )
        parser.add_argument(
            "--rewrap-only",
            action="store_true",
            help="Add no new key: re-wrap what is not yet under the active key (finish a rotation).",
        )

    def handle(self, *args, remove_old: bool = False, rewrap_only: bool = False, **options) -> None:
        try:
            report = rotate_master_key(rewrap_only=rewrap_only, remove_old=remove_old)
        except MasterKeyError as error:
            raise CommandError(str(error)) from None
        lines = [
            f"{'New active' if report.added else 'Active'} master key: {report.active_id}.",
            f"Re-wrapped {report.customer_keys_rewrapped} customer key(s) and {report.flows_rewrapped} flow(s).",
        ]
        if report.removed:
            lines.append(f"Removed old master key(s): {', '.join(report.removed)}.")
        for key_id, count in report.still_used.items():
            lines.append(f"Kept old master key {key_id}: {count} customer key(s)/flow(s) still use it.")
        if not remove_old:
            lines.append("Old master keys are kept for unwrapping; remove them with --remove-old.")
        self.stdout.write("\n".join(lines))
        if report.failures:
            raise CommandError(
                "Not re-wrapped (fix these and run again with --rewrap-only):\n  "
                + "\n  ".join(report.failures)
            )
