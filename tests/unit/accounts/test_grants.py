"""An administrator writes an access list by hand: a pack's ACL and a data
node's grants read it the same way and refuse the same mistakes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from portal.accounts.grants import parse_principal_grants
from portal.templatepacks.models import PackAcl
from portal.topology.models import DataNodeGrant

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("model", "role"), [(PackAcl, "reader"), (DataNodeGrant, "read")])
def test_each_mistake_is_named_by_its_entry_and_a_repeat_counts_once(owner, model, role):
    Group.objects.create(name="analysts")
    roles = {choice for choice, _label in model.Role.choices}
    good = [{"role": role, "group": "analysts"}, {"role": role, "group": "analysts"}]
    rows = parse_principal_grants(good, model, roles=roles, field="acl")
    assert [(row.role, row.group.name) for row in rows] == [(role, "analysts")]

    with pytest.raises(ValidationError) as refused:
        parse_principal_grants(
            [
                {"role": "admin", "user": owner.username},
                {"role": role, "user": owner.username, "group": "analysts"},
                {"role": role, "user": "ghost"},
                {"role": role, "group": "ghosts"},
                "owner",
            ],
            model,
            roles=roles,
            field="acl",
        )
    problems = refused.value.message_dict["acl"]
    assert problems[0].startswith("entry 1: role must be one of ") and problems[0].endswith(", not 'admin'.")
    assert problems[1:] == [
        "entry 2: give exactly one of 'user' or 'group' (a name).",
        "entry 3: no user named 'ghost'.",
        "entry 4: no group named 'ghosts' (directory groups appear after a member logs in).",
        "entry 5: must be an object with 'role' and 'user' or 'group'.",
    ]


def test_an_access_list_must_be_a_list():
    with pytest.raises(ValidationError) as refused:
        parse_principal_grants({"role": "read"}, DataNodeGrant, roles={"read"}, field="acl")
    assert refused.value.message_dict == {"acl": ["Send a list of {role, user|group} entries."]}
