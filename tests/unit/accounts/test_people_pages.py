"""Staff manage the portal's users and groups on its own pages, not in a shell or Django's admin:
they list and find users, create one with a password (Django's own form and validators, each
mistake named at its field), set their groups, deactivate and reactivate them, and make groups.
Where an LDAP directory signs users in, the pages say so and only show who is in which group."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from portal.accounts.tokens import create_token
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


@pytest.fixture
def desk(staff) -> Client:
    client = Client()
    client.force_login(staff, backend=MODEL_BACKEND)
    return client


def test_staff_create_a_user_who_then_signs_in_in_the_groups_chosen(desk):
    team = Group.objects.create(name="analysts")
    form = desk.get("/people/new/").content.decode()
    assert 'name="password1"' in form and 'name="password2"' in form and "analysts" in form
    assert "<legend>Groups</legend>" in form  # its boxes named together, not a label pointing nowhere
    made = desk.post(
        "/people/new/",
        {
            "username": "ursula",
            "email": "u@example.org",
            "password1": "a long pass phrase 42",
            "password2": "a long pass phrase 42",
            "groups": [team.pk],
        },
        follow=True,
    )
    ursula = get_user_model().objects.get(username="ursula")
    assert made.redirect_chain == [(f"/people/{ursula.pk}/", 302)]
    assert "User ursula created" in made.content.decode()
    assert list(ursula.groups.values_list("name", flat=True)) == ["analysts"]
    assert not ursula.is_staff
    assert Client().login(username="ursula", password="a long pass phrase 42")
    listed = desk.get("/people/?q=analysts").content.decode()
    assert f'href="/people/{ursula.pk}/">ursula</a>' in listed and "<code>analysts</code>" in listed


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"username": "olivia"}, "username", "A user with that username already exists."),
        ({"username": "bad name!"}, "username", "Enter a valid username."),
        ({"password2": "something else entirely"}, "password2", "The two password fields didn"),
        ({"password1": "123", "password2": "123"}, "password2", "This password is too short."),
    ],
)
def test_a_mistake_is_named_at_its_field_and_nothing_is_made(desk, owner, fields, field, message):
    before = get_user_model().objects.count()
    body = {"username": "newbie", "password1": "a long pass phrase 42", "password2": "a long pass phrase 42"}
    answer = desk.post("/people/new/", {**body, **fields})
    assert answer.status_code == 400
    assert message in " ".join(answer.context["form"].errors[field])
    assert f'id="id_{field}_error"' in answer.content.decode()
    assert get_user_model().objects.count() == before


def test_staff_set_groups_and_make_a_group(desk, owner):
    made = desk.post("/people/groups/", {"name": "sales"}, follow=True)
    sales = Group.objects.get(name="sales")
    assert made.redirect_chain == [(f"/people/groups/{sales.pk}/", 302)]
    assert desk.post("/people/groups/", {"name": "sales"}).status_code == 400
    desk.post(f"/people/{owner.pk}/", {"groups": [sales.pk]})
    assert list(owner.groups.values_list("name", flat=True)) == ["sales"]
    members = desk.get(f"/people/groups/{sales.pk}/").content.decode()
    assert f'href="/people/{owner.pk}/">olivia</a>' in members
    assert "1</td>" in desk.get("/people/groups/").content.decode()
    assert desk.post(f"/people/{owner.pk}/", {"groups": ["999999"]}).status_code == 400


def test_a_deactivated_user_cannot_sign_in_until_reactivated(desk, owner):
    _token, key = create_token(owner, name="nightly")
    assert Client().get("/api/me", headers={"Authorization": f"Token {key}"}).status_code == 200
    assert desk.post(f"/people/{owner.pk}/active/", {"active": "no"}).status_code == 302
    owner.refresh_from_db()
    assert not owner.is_active and not Client().login(username="olivia", password=PASSWORD)
    assert Client().get("/api/me", headers={"Authorization": f"Token {key}"}).status_code == 401
    assert "deactivated" in desk.get(f"/people/{owner.pk}/").content.decode()
    desk.post(f"/people/{owner.pk}/active/", {"active": "yes"})
    assert Client().login(username="olivia", password=PASSWORD)


def test_nobody_deactivates_themselves_and_only_a_superuser_changes_a_superuser(desk, staff):
    answer = desk.post(f"/people/{staff.pk}/active/", {"active": "no"})
    assert answer.status_code == 400 and "You cannot deactivate yourself" in answer.content.decode()
    staff.refresh_from_db()
    assert staff.is_active
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert desk.post(f"/people/{root.pk}/active/", {"active": "no"}).status_code == 403
    assert desk.post(f"/people/{root.pk}/", {"groups": []}).status_code == 403
    root.refresh_from_db()
    assert root.is_active


def test_with_ldap_the_pages_say_so_and_only_show(desk, owner, settings):
    settings.AUTH_LDAP_SERVER_URI = "ldap://directory.example:389"
    settings.AUTHENTICATION_BACKENDS = ["portal.accounts.backends.DirectoryBackend", MODEL_BACKEND]
    team = Group.objects.create(name="etl-team")
    owner.groups.add(team)
    listed = desk.get("/people/").content.decode()
    assert 'id="directory-note"' in listed and "ldap://directory.example:389" in listed
    assert 'id="new-user"' not in listed
    shown = desk.get(f"/people/{owner.pk}/").content.decode()
    assert 'id="groups-form"' not in shown and "<code>etl-team</code>" in shown
    assert "olivia" in desk.get(f"/people/groups/{team.pk}/").content.decode()
    assert desk.get("/people/new/").status_code == 403
    assert desk.post(f"/people/{owner.pk}/", {"groups": []}).status_code == 403
    assert desk.post(f"/people/{owner.pk}/active/", {"active": "no"}).status_code == 403
    assert desk.post("/people/groups/", {"name": "x"}).status_code == 403
    assert list(owner.groups.values_list("name", flat=True)) == ["etl-team"]
