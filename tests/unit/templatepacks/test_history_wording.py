"""A pack's history reads as English: a change whose summary only repeats its heading ("ACL
changed by admin — ACL changed", written before summaries said what changed) is told once."""

from __future__ import annotations

import pytest

from portal.templatepacks.models import PackAuditEvent

pytestmark = pytest.mark.django_db


def test_a_summary_that_repeats_the_heading_is_not_said_twice(client, pack, owner):
    PackAuditEvent.objects.create(pack_name=pack.name, action="acl", actor=owner, summary="ACL changed")
    PackAuditEvent.objects.create(
        pack_name=pack.name, action="acl", actor=owner, summary="reader user:bob added"
    )
    client.force_login(owner)
    page = client.get(f"/packs/{pack.name}/history/").content.decode()
    assert "— ACL changed" not in page
    assert "— reader user:bob added" in page
