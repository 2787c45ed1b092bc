"""An operator creates local accounts from a script: a user, a staff member in
a group, a superuser; each then logs in with the password given."""

from __future__ import annotations

import io
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command


@pytest.fixture
def add(monkeypatch):
    """Runs the command with `stdin` as its standard input (a pipe, not a terminal)."""

    def run(*args: str, stdin: str = "") -> str:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        out = io.StringIO()
        call_command("add_user", *args, stdout=out)
        return out.getvalue()

    return run


@pytest.mark.django_db
def test_a_user_created_with_a_password_on_stdin_logs_in(client, add):
    assert (
        add("ursula", "--email", "u@example.org", stdin="correct horse battery\n") == "Created user ursula.\n"
    )
    user = get_user_model().objects.get(username="ursula")
    assert (user.is_staff, user.is_superuser, user.email) == (False, False, "u@example.org")
    assert client.login(username="ursula", password="correct horse battery")


@pytest.mark.django_db
def test_staff_in_groups_with_a_generated_password(client, add):
    out = add("sam", "--staff", "--group", "data-eng", "--group", "ops", "--generate-password")
    password = out.split("Password (shown once): ")[1].strip()
    user = get_user_model().objects.get(username="sam")
    assert (user.is_staff, user.is_superuser) == (True, False)
    assert sorted(user.groups.values_list("name", flat=True)) == ["data-eng", "ops"]
    assert client.login(username="sam", password=password)


@pytest.mark.django_db
def test_a_superuser_is_staff_too(add):
    add("root2", "--superuser", "--generate-password")
    user = get_user_model().objects.get(username="root2")
    assert (user.is_staff, user.is_superuser) == (True, True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["olivia"], "another long password", "already exists"),
        (["bad name!"], "another long password", "username:"),
        (["weak"], "123", "password:"),
        (["empty"], "", "no password on standard input"),
    ],
)
def test_mistakes_are_refused_with_the_reason_and_nothing_is_created(add, args, stdin, message):
    get_user_model().objects.create_user("olivia", password="x")
    before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=message):
        add(*args, stdin=stdin)
    assert get_user_model().objects.count() == before
