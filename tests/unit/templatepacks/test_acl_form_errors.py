"""An owner edits a pack's access list on its page and mistypes a name: the problem is shown
in the box they typed it in, naming their line, not as "entry 3" at the top of the form."""

from __future__ import annotations

from html import unescape

import pytest

from portal.templatepacks.models import PackAcl

pytestmark = pytest.mark.django_db


def field_errors(html: str, field: str) -> str:
    start = html.index(f'id="id_{field}_error"')
    return unescape(html[start : html.index("</div>", start)])


def test_an_unknown_reader_is_named_at_the_readers_box(client, owner, reader, pack):
    client.force_login(owner)
    before = PackAcl.objects.filter(pack=pack).count()
    response = client.post(
        f"/packs/{pack.name}/acl/",
        {"owners": f"user:{owner.username}", "readers": "user:rita\nuser:ghost\ngroup:nobody-here"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    said = field_errors(html, "readers")
    assert "'user:ghost': no user named 'ghost'." in said
    assert "'group:nobody-here': no group named 'nobody-here'" in said
    assert "entry" not in said
    assert 'class="errors" role="alert"' not in html  # nothing left for the top of the form
    assert 'id="id_owners_error"' not in html
    assert 'aria-invalid="true"' in html.split('id="id_readers"')[0].rsplit("<textarea", 1)[1]
    assert PackAcl.objects.filter(pack=pack).count() == before


def test_an_unknown_owner_is_named_at_the_owners_box(client, owner, reader, pack):
    client.force_login(owner)
    response = client.post(
        f"/packs/{pack.name}/acl/", {"owners": f"user:{owner.username}\n user:ghost ", "readers": "user:rita"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "'user:ghost': no user named 'ghost'." in field_errors(html, "owners")
    assert 'id="id_readers_error"' not in html
