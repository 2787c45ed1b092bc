"""Reading an access list as users send it — `[{"role": …, "user"|"group": name}]`
— into unsaved rows of a PrincipalGrant model: one parser for a template
pack's ACL and a data node's grants, so both refuse the same mistakes with
the same words."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from portal.accounts.models import PrincipalGrant

Grant = TypeVar("Grant", bound=PrincipalGrant)


def parse_principal_grants(
    entries: Any, model: type[Grant], *, roles: Iterable[str], field: str
) -> list[Grant]:
    """Validated, unsaved rows (a repeated entry once); ValidationError({field: [...]})
    naming each bad entry by its position."""
    if not isinstance(entries, list):
        raise ValidationError({field: ["Send a list of {role, user|group} entries."]})
    roles = sorted(roles)
    rows: list[Grant] = []
    problems: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    users = get_user_model().objects
    for index, entry in enumerate(entries, start=1):
        where = f"entry {index}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object with 'role' and 'user' or 'group'.")
            continue
        role, user_name, group_name = entry.get("role"), entry.get("user"), entry.get("group")
        if role not in roles:
            problems.append(f"{where}: role must be one of {', '.join(roles)}, not {role!r}.")
            continue
        if bool(user_name) == bool(group_name) or not isinstance(user_name or group_name, str):
            problems.append(f"{where}: give exactly one of 'user' or 'group' (a name).")
            continue
        key = (role, "user" if user_name else "group", user_name or group_name)
        if key in seen:
            continue
        seen.add(key)
        if user_name:
            user = users.filter(username=user_name).first()
            if user is None:
                problems.append(f"{where}: no user named {user_name!r}.")
            else:
                rows.append(model(role=role, user=user))
            continue
        group = Group.objects.filter(name=group_name).first()
        if group is None:
            problems.append(
                f"{where}: no group named {group_name!r} (directory groups appear after a member logs in)."
            )
        else:
            rows.append(model(role=role, group=group))
    if problems:
        raise ValidationError({field: problems})
    return rows
