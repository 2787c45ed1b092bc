"""A new user finds a pack they were told about, asks its owners for access,
and an owner grants it (audited) or declines."""

from __future__ import annotations

import pytest

from portal.accounts import access
from portal.templatepacks.models import PackAccessRequest, PackAuditEvent

P = "sales-pack"


def _ask(client, user, message="for the sales ingest"):
    client.force_login(user)
    return client.post(f"/packs/{P}/request-access/", {"message": message})


def test_an_outsider_asks_and_the_owner_sees_the_request_on_the_packs_page(client, pack, owner, outsider):
    assert _ask(client, outsider).status_code == 302
    listed = client.get("/packs/")
    assert listed.context["closed"][0]["requested"] is True

    client.force_login(owner)
    page = client.get(f"/packs/{P}/")
    assert [r.requested_by.username for r in page.context["access_requests"]] == ["oscar"]
    assert "for the sales ingest" in page.content.decode()


def test_granting_makes_the_user_a_reader_through_the_audited_acl(client, pack, owner, outsider):
    _ask(client, outsider)
    asked = PackAccessRequest.objects.get()
    client.force_login(owner)
    response = client.post(f"/packs/{P}/access-requests/{asked.pk}/", {"decision": "grant"})
    assert response.status_code == 302
    assert access.can(outsider, access.VIEW, pack)
    asked.refresh_from_db()
    assert (asked.granted, asked.decided_by) == (True, owner)
    latest = PackAuditEvent.objects.filter(pack_name=P, action="acl").first()
    assert (latest.actor, "reader user:oscar" in latest.diff) == (owner, True)
    client.force_login(outsider)
    assert client.get(f"/packs/{P}/").status_code == 200


def test_declining_leaves_the_acl_as_it_was_and_the_user_may_ask_again(client, pack, owner, outsider):
    _ask(client, outsider)
    asked = PackAccessRequest.objects.get()
    client.force_login(owner)
    acl_changes = PackAuditEvent.objects.filter(pack_name=P, action="acl").count()
    client.post(f"/packs/{P}/access-requests/{asked.pk}/", {"decision": "decline"})
    assert not access.can(outsider, access.VIEW, pack)
    assert PackAuditEvent.objects.filter(pack_name=P, action="acl").count() == acl_changes
    assert _ask(client, outsider).status_code == 302
    assert PackAccessRequest.objects.filter(decided_at__isnull=True).count() == 1


def test_asking_twice_or_for_a_pack_one_can_read_says_why(client, pack, reader, outsider):
    _ask(client, outsider)
    follow = client.post(f"/packs/{P}/request-access/", {"message": ""}, follow=True)
    assert "already asked" in follow.content.decode()
    assert PackAccessRequest.objects.count() == 1

    client.force_login(reader)
    follow = client.post(f"/packs/{P}/request-access/", {}, follow=True)
    assert "already read" in follow.content.decode()
    assert PackAccessRequest.objects.count() == 1


@pytest.mark.parametrize(("who", "status"), [("reader", 403), ("outsider", 404)])
def test_only_owners_answer_requests(client, pack, outsider, reader, who, status, request):
    _ask(client, outsider)
    asked = PackAccessRequest.objects.get()
    client.force_login(request.getfixturevalue(who))
    response = client.post(f"/packs/{P}/access-requests/{asked.pk}/", {"decision": "grant"})
    assert response.status_code == status
    asked.refresh_from_db()
    assert asked.decided_at is None
    assert not access.can(outsider, access.VIEW, pack)
