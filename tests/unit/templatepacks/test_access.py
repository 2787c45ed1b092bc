"""Who may see, use and change a pack — every page and API endpoint, one list.

An outsider gets 404 on every page and endpoint of the pack (only the pack
list names it, with its owners, so they know whom to ask); a reader sees but
cannot change (403); the owner can."""

from __future__ import annotations

import pytest

from portal.templatepacks.models import PackAcl, PackAuditEvent, PackVersion, TemplatePack
from tests.builders.api import api_client_for
from tests.unit.templatepacks.factories import SALES_TEMPLATES, upload, zip_bytes

P = "sales-pack"
T = "ingest/jdbc.template"

# (method, url, data) — data: dict for JSON/form, callable for a fresh upload
API_READS = [
    ("get", f"/api/templatepacks/{P}", None),
    ("get", f"/api/templatepacks/{P}/templates", None),
    ("get", f"/api/templatepacks/{P}/templates/{T}", None),
    ("get", f"/api/templatepacks/{P}/acl", None),
    ("get", f"/api/templatepacks/{P}/versions", None),
    ("get", f"/api/templatepacks/{P}/history", None),
]
API_WRITES = [
    ("delete", f"/api/templatepacks/{P}", None),
    ("post", f"/api/templatepacks/{P}/templates", {"path": "new.template", "text": "a = 1"}),
    ("put", f"/api/templatepacks/{P}/templates/{T}", {"text": "a = 1"}),
    ("delete", f"/api/templatepacks/{P}/templates/{T}", None),
    ("put", f"/api/templatepacks/{P}/acl", {"entries": [{"role": "owner", "user": "oscar"}]}),
    ("post", f"/api/templatepacks/{P}/versions", lambda: {"archive": upload(zip_bytes(SALES_TEMPLATES))}),
    ("post", f"/api/templatepacks/{P}/versions/1/rollback", None),
]
PAGE_READS = [
    ("get", f"/packs/{P}/", None),
    ("get", f"/packs/{P}/history/", None),
    ("get", f"/packs/{P}/templates/{T}", None),
]
PAGE_WRITES = [
    ("get", f"/packs/{P}/delete/", None),
    ("post", f"/packs/{P}/delete/", {}),
    ("post", f"/packs/{P}/upload/", lambda: {"archive": upload(zip_bytes(SALES_TEMPLATES))}),
    ("post", f"/packs/{P}/acl/", {"owners": "user:oscar", "readers": ""}),
    ("post", f"/packs/{P}/versions/1/rollback/", {}),
    ("post", f"/packs/{P}/new-template/", {"path": "new.template", "text": "a = 1"}),
    ("post", f"/packs/{P}/edit/{T}", {"text": "a = 1"}),
]


def _snapshot():
    return (
        list(TemplatePack.objects.values_list("name", "current_version__number")),
        PackVersion.objects.count(),
        sorted(PackAcl.objects.values_list("role", "user__username", "group__name")),
        PackAuditEvent.objects.count(),
    )


def _call_api(user, method, url, data):
    client = api_client_for(user)
    payload = data() if callable(data) else data
    fmt = "multipart" if callable(data) else "json"
    return (
        getattr(client, method)(url, payload, format=fmt)
        if payload is not None
        else getattr(client, method)(url)
    )


def _call_page(client, user, method, url, data):
    client.force_login(user)
    payload = data() if callable(data) else data
    return getattr(client, method)(url, payload) if method == "post" else client.get(url)


@pytest.mark.parametrize(("method", "url", "data"), API_READS + API_WRITES)
def test_outsider_can_neither_see_nor_change_the_pack_through_the_api(pack, outsider, method, url, data):
    before = _snapshot()
    assert _call_api(outsider, method, url, data).status_code == 404
    assert _snapshot() == before


@pytest.mark.parametrize(("method", "url", "data"), PAGE_READS + PAGE_WRITES)
def test_outsider_can_neither_see_nor_change_the_pack_through_pages(
    client, pack, outsider, method, url, data
):
    before = _snapshot()
    assert _call_page(client, outsider, method, url, data).status_code == 404
    assert _snapshot() == before


def test_outsider_finds_only_the_packs_name_and_owners_and_cannot_resolve_its_templates(
    client, pack, outsider
):
    api = api_client_for(outsider)
    assert [p["name"] for p in api.get("/api/templatepacks").json()["results"]] == []
    client.force_login(outsider)
    page = client.get("/packs/")
    assert [row["pack"].name for row in page.context["closed"]] == [P]
    assert page.context["closed"][0]["owners"] == ["olivia"]
    assert f'href="/packs/{P}/"' not in page.content.decode()  # no link into the pack
    assert list(page.context["packs"]) == []
    response = api.post("/api/templates/resolve", {"templateUri": f"pack://{P}/{T}"}, format="json")
    assert response.status_code == 400
    assert "does not exist or you cannot read it" in response.json()["templateUri"][0]


@pytest.mark.parametrize(("method", "url", "data"), API_READS)
def test_reader_sees_the_pack_through_the_api(pack, reader, method, url, data):
    assert _call_api(reader, method, url, data).status_code == 200


@pytest.mark.parametrize(("method", "url", "data"), PAGE_READS)
def test_reader_sees_the_pack_pages(client, pack, reader, method, url, data):
    assert _call_page(client, reader, method, url, data).status_code == 200


@pytest.mark.parametrize(("method", "url", "data"), API_WRITES)
def test_reader_cannot_change_the_pack_through_the_api(pack, reader, method, url, data):
    before = _snapshot()
    assert _call_api(reader, method, url, data).status_code == 403
    assert _snapshot() == before


@pytest.mark.parametrize(("method", "url", "data"), PAGE_WRITES)
def test_reader_cannot_change_the_pack_through_pages(client, pack, reader, method, url, data):
    before = _snapshot()
    assert _call_page(client, reader, method, url, data).status_code == 403
    assert _snapshot() == before


@pytest.mark.parametrize(("method", "url", "data"), API_WRITES)
def test_owner_changes_the_pack_through_the_api(pack, owner, outsider, method, url, data):
    response = _call_api(owner, method, url, data)
    assert response.status_code in (200, 201, 204), response.content
    assert PackAuditEvent.objects.filter(pack_name=P).exclude(action__in=["create", "upload"]).count() >= 1


@pytest.mark.parametrize(("method", "url", "data"), PAGE_WRITES)
def test_owner_changes_the_pack_through_pages(client, pack, owner, outsider, method, url, data):
    response = _call_page(client, owner, method, url, data)
    assert response.status_code in (200, 302), response.content


def test_group_readers_and_group_owners(pack, owner, outsider):
    from django.contrib.auth.models import Group

    team = Group.objects.create(name="etl-team")
    outsider.groups.add(team)
    api = api_client_for(owner)
    entries = [{"role": "owner", "user": "olivia"}, {"role": "reader", "group": "etl-team"}]
    assert api.put(f"/api/templatepacks/{P}/acl", {"entries": entries}, format="json").status_code == 200
    assert api_client_for(outsider).get(f"/api/templatepacks/{P}").status_code == 200
    assert api_client_for(outsider).delete(f"/api/templatepacks/{P}").status_code == 403
    entries[1]["role"] = "owner"
    api.put(f"/api/templatepacks/{P}/acl", {"entries": entries}, format="json")
    assert api_client_for(outsider).get(f"/api/templatepacks/{P}").json()["canEdit"] is True


def test_staff_see_every_pack_but_do_not_edit_it(pack, staff):
    api = api_client_for(staff)
    assert api.get(f"/api/templatepacks/{P}").status_code == 200
    assert api.delete(f"/api/templatepacks/{P}").status_code == 403


def test_acl_must_keep_an_owner_and_name_real_principals(pack, owner):
    api = api_client_for(owner)
    for entries, reason in [
        ([{"role": "reader", "user": "olivia"}], "at least one owner"),
        ([{"role": "owner", "user": "ghost"}], "no user named 'ghost'"),
        ([{"role": "owner", "group": "ghosts"}], "no group named 'ghosts'"),
    ]:
        response = api.put(f"/api/templatepacks/{P}/acl", {"entries": entries}, format="json")
        assert response.status_code == 400
        assert reason in " ".join(response.json()["entries"])
    assert list(PackAcl.objects.filter(role="owner").values_list("user__username", flat=True)) == ["olivia"]
