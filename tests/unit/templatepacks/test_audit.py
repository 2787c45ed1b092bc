"""The pack audit trail is append-only and says who did what for whom."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from portal.accounts.tokens import create_token
from portal.templatepacks.models import ImmutableRow, JobTemplate, PackAuditEvent, PackVersion
from tests.builders.api import api_client_for
from tests.factories import UserFactory


def test_audit_rows_cannot_be_changed_or_deleted_through_the_orm(pack):
    event = PackAuditEvent.objects.first()
    event.summary = "nothing happened"
    with pytest.raises(ImmutableRow):
        event.save()
    with pytest.raises(ImmutableRow):
        event.delete()
    with pytest.raises(ImmutableRow):
        PackAuditEvent.objects.filter(pk=event.pk).update(summary="x")
    with pytest.raises(ImmutableRow):
        PackAuditEvent.objects.all().delete()
    with pytest.raises(ImmutableRow):
        PackAuditEvent.objects.bulk_update([event], ["summary"])
    event.refresh_from_db()
    assert event.summary != "nothing happened"


def test_versions_and_stored_templates_are_immutable(pack):
    version = PackVersion.objects.get()
    version.message = "rewritten"
    with pytest.raises(ImmutableRow):
        version.save()
    template = JobTemplate.objects.first()
    template.text = "evil = true"
    with pytest.raises(ImmutableRow):
        template.save()
    with pytest.raises(ImmutableRow):
        JobTemplate.objects.update(text="evil = true")


def test_admin_shows_audit_rows_read_only(client, pack, db):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    event = PackAuditEvent.objects.first()

    assert client.get("/admin/templatepacks/packauditevent/").status_code == 200
    page = client.get(f"/admin/templatepacks/packauditevent/{event.pk}/change/")
    assert page.status_code == 200
    assert 'type="submit"' not in page.content.decode().split('id="content-main"')[1]
    assert (
        client.post(f"/admin/templatepacks/packauditevent/{event.pk}/change/", {"summary": "x"}).status_code
        == 403
    )
    assert (
        client.post(f"/admin/templatepacks/packauditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert client.get("/admin/templatepacks/packauditevent/add/").status_code == 403
    assert PackAuditEvent.objects.filter(pk=event.pk, summary=event.summary).exists()


def test_history_api_lists_every_change_with_diffs(pack, owner):
    api = api_client_for(owner)
    api.put(
        f"/api/templatepacks/{pack.name}/templates/base.template",
        {"text": "job.commit.policy = partial\n"},
        format="json",
    )
    api.put(
        f"/api/templatepacks/{pack.name}/acl",
        {"entries": [{"role": "owner", "user": "olivia"}]},
        format="json",
    )
    api.post(f"/api/templatepacks/{pack.name}/versions/1/rollback")

    history = api.get(f"/api/templatepacks/{pack.name}/history").json()["results"]

    assert [e["action"] for e in history] == ["rollback", "acl", "edit", "acl", "upload", "create"]
    acl = history[1]
    assert "-reader user:rita" in acl["diff"]
    assert acl["summary"] == "reader user:rita removed"  # what changed, not "ACL changed" again
    assert "+job.commit.policy = partial" in history[2]["diff"]
    assert all(e["actor"] == "olivia" and e["onBehalfOf"] is None for e in history)


def test_history_survives_deleting_the_pack(pack, owner):
    api = api_client_for(owner)
    assert api.delete(f"/api/templatepacks/{pack.name}").status_code == 204
    actions = list(PackAuditEvent.objects.filter(pack_name="sales-pack").values_list("action", flat=True))
    assert actions[0] == "delete"
    assert "-job.commit.policy = full" in PackAuditEvent.objects.filter(action="delete").get().diff


def test_a_proxied_change_records_both_the_actor_and_whom_they_acted_for(pack, owner, settings):
    settings.FLOWPORT_PROXY_GROUP = "flowport-proxies"
    bot = UserFactory(username="deploy-bot")
    bot.groups.add(Group.objects.create(name="flowport-proxies"))

    _token, key = create_token(bot, name="deploy")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.put(
        f"/api/templatepacks/{pack.name}/templates/base.template",
        {"text": "a = 1\n"},
        format="json",
        HTTP_X_FLOWPORT_PROXY_USER="olivia",
    )

    assert response.status_code == 200
    event = PackAuditEvent.objects.filter(action="edit").get()
    assert (event.actor.username, event.on_behalf_of.username) == ("deploy-bot", "olivia")


def test_history_page_shows_diffs_and_htmx_gets_the_fragment(client, pack, reader):
    client.force_login(reader)
    page = client.get(f"/packs/{pack.name}/history/").content.decode()
    assert "+job.commit.policy = full" in page and "<html" in page
    fragment = client.get(f"/packs/{pack.name}/history/", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment and 'id="pack-history"' in fragment


def test_a_template_edited_in_a_browser_keeps_lf_and_its_diff_shows_only_the_changed_line(
    client, pack, owner
):
    """Browsers send a textarea with CRLF line ends; the stored text and the
    history diff must not mark every line as changed."""
    from portal.templatepacks.models import JobTemplate

    client.force_login(owner)
    stored = JobTemplate.objects.get(version_id=pack.current_version_id, path="base.template").text
    edited = stored.replace("parquet", "orc").replace("\n", "\r\n")
    response = client.post(f"/packs/{pack.name}/edit/base.template", {"text": edited})
    assert response.status_code == 302
    pack.refresh_from_db()
    text = JobTemplate.objects.get(version_id=pack.current_version_id, path="base.template").text
    assert "\r" not in text and text == stored.replace("parquet", "orc")
    diff = PackAuditEvent.objects.filter(action="edit").first().diff
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-writer.output.format = parquet", "+writer.output.format = orc"]

    page = client.get(f"/packs/{pack.name}/history/").content.decode()
    assert '<span class="diff-del">-writer.output.format = parquet</span>' in page
    assert '<span class="diff-add">+writer.output.format = orc</span>' in page


def test_two_owners_editing_from_pages_loaded_before_either_keep_both_templates(pack, owner):
    """Each saved from the pack as it was when their page loaded: the second
    save must not drop the template the first one added."""
    from portal.templatepacks import services
    from portal.templatepacks.models import JobTemplate, TemplatePack

    first_view, second_view = TemplatePack.objects.get(pk=pack.pk), TemplatePack.objects.get(pk=pack.pk)
    services.save_template(first_view, user=owner, path="one.template", text="a = 1\n")
    services.save_template(second_view, user=owner, path="two.template", text="b = 2\n")
    pack.refresh_from_db()
    paths = set(JobTemplate.objects.filter(version_id=pack.current_version_id).values_list("path", flat=True))
    assert {"one.template", "two.template", "base.template"} <= paths
