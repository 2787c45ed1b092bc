"""An owner saves a template with a typo: the page says where and what was
expected, in one line, not the parser's grammar."""

from __future__ import annotations

import pytest

from portal.templatepacks.models import PackVersion


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "source.files.format csv }\n",
            "line 1, column 25: Expected '=', ':', '+=' or '[' (near 'source.files.format csv }')",
        ),
        ("a = {\n", "line 2, column 1: Expected '}'"),
    ],
)
def test_a_template_typo_is_one_line_with_where_and_what(client, pack, owner, text, said):
    client.force_login(owner)
    versions = PackVersion.objects.count()
    response = client.post(f"/packs/{pack.name}/new-template/", {"path": "typo.template", "text": text})
    assert response.status_code == 400
    errors = response.context["form"].errors["text"]
    assert errors == [f"typo.template: invalid HOCON at {said}"]
    assert PackVersion.objects.count() == versions
