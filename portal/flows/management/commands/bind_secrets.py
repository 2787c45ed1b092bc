"""`manage.py bind_secrets`: bind the ENC values made before owner binding."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from portal.crypto.errors import MasterKeyError
from portal.flows.binding import bind_legacy_values


class Command(BaseCommand):
    help = (
        "Encrypt every flow's version 1 ENC(...) value (made before values were bound to their key's "
        "owner) again, bound to that owner, so it decrypts only in flows that owner owns. Needs the "
        "master key; running it again changes nothing."
    )

    def handle(self, *args, **options) -> None:
        try:
            report = bind_legacy_values()
        except MasterKeyError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Bound {report.values_bound} value(s) in {report.flows_bound} flow(s).")
        if report.failures:
            raise CommandError("Not bound (fix these and run again):\n  " + "\n  ".join(report.failures))
