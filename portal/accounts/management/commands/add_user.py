"""`manage.py add_user NAME`: a local account (the portal's own, beside or
instead of LDAP), optionally staff or superuser and in groups.

Django's `createsuperuser` makes only superusers and `changepassword` only
changes passwords; operators also need plain users, staff and group members
from a script, so this wraps the same model calls and password validators."""

from __future__ import annotations

import getpass
import secrets
import sys

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction


class Command(BaseCommand):
    help = (
        "Create a local user. The password is read from standard input when it is not a terminal, "
        "asked for twice when it is, or generated and printed once with --generate-password."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--staff", action="store_true", help="may manage the topology and see every flow")
        parser.add_argument("--superuser", action="store_true", help="staff who may also edit everything")
        parser.add_argument(
            "--group", action="append", default=[], help="a group to join (made if missing); repeat for more"
        )
        parser.add_argument("--generate-password", action="store_true", help="print a new random password")

    def handle(
        self, *args, username: str, email: str, staff: bool, superuser: bool, group: list[str], **options
    ):
        users = get_user_model().objects
        if users.filter(username=username).exists():
            raise CommandError(f"A user named {username!r} already exists (change it in /admin/).")
        user = get_user_model()(
            username=username, email=email, is_staff=staff or superuser, is_superuser=superuser
        )
        try:
            user.full_clean(exclude=["password"])
        except ValidationError as error:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())
            ) from None
        password = secrets.token_urlsafe(15) if options["generate_password"] else self._read_password()
        try:
            password_validation.validate_password(password, user)
        except ValidationError as error:
            raise CommandError("password: " + " ".join(error.messages)) from None
        with transaction.atomic():
            user.set_password(password)
            user.save()
            user.groups.set([Group.objects.get_or_create(name=name)[0] for name in group])
        role = "superuser" if superuser else "staff" if staff else "user"
        groups = f" in {', '.join(group)}" if group else ""
        self.stdout.write(f"Created {role} {username}{groups}.")
        if options["generate_password"]:
            self.stdout.write(f"Password (shown once): {password}")

    def _read_password(self) -> str:
        if not sys.stdin.isatty():
            password = sys.stdin.readline().rstrip("\n")
            if not password:
                raise CommandError("no password on standard input (or use --generate-password)")
            return password
        first, second = getpass.getpass("Password: "), getpass.getpass("Password (again): ")
        if first != second:
            raise CommandError("the passwords differ")
        return first
