"""Replacing a pack's ACL: validated whole, stored in one transaction, audited."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from portal.templatepacks import audit
from portal.templatepacks.models import PackAcl, PackAuditEvent, TemplatePack

ROLES = {choice for choice, _label in PackAcl.Role.choices}


def acl_entries(pack: TemplatePack) -> list[dict[str, str]]:
    """The ACL as plain entries, sorted, e.g. {"role": "owner", "user": "alice"}."""
    entries = []
    for entry in pack.acl.select_related("user", "group"):
        if entry.user_id:
            entries.append({"role": entry.role, "user": entry.user.username})
        else:
            entries.append({"role": entry.role, "group": entry.group.name})
    return sorted(entries, key=lambda e: (e["role"], "user" in e, e.get("user") or e.get("group")))


def _describe(entries: list[dict[str, str]]) -> list[str]:
    return [
        f"{e['role']} {'user' if 'user' in e else 'group'}:{e.get('user') or e.get('group')}" for e in entries
    ]


def _parse(entries: list[dict]) -> list[PackAcl]:
    if not isinstance(entries, list):
        raise ValidationError({"entries": ["Send a list of {role, user|group} entries."]})
    rows, problems, seen = [], [], set()
    users = get_user_model().objects
    for index, entry in enumerate(entries):
        where = f"entry {index + 1}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object with 'role' and 'user' or 'group'.")
            continue
        role = entry.get("role")
        user_name, group_name = entry.get("user"), entry.get("group")
        if role not in ROLES:
            problems.append(f"{where}: role must be 'owner' or 'reader', not {role!r}.")
            continue
        if bool(user_name) == bool(group_name) or not isinstance(user_name or group_name, str):
            problems.append(f"{where}: give exactly one of 'user' or 'group' (a name).")
            continue
        key = (role, "user" if user_name else "group", user_name or group_name)
        if key in seen:
            continue
        seen.add(key)
        if user_name:
            principal = users.filter(username=user_name).first()
            if principal is None:
                problems.append(f"{where}: no user named {user_name!r}.")
                continue
            rows.append(PackAcl(role=role, user=principal))
        else:
            principal = Group.objects.filter(name=group_name).first()
            if principal is None:
                problems.append(
                    f"{where}: no group named {group_name!r} (directory groups appear after a member logs in)."
                )
                continue
            rows.append(PackAcl(role=role, group=principal))
    if not problems and not any(row.role == "owner" for row in rows):
        problems.append("A pack needs at least one owner.")
    if problems:
        raise ValidationError({"entries": problems})
    return rows


def apply_acl(pack: TemplatePack, entries: list[dict], *, user, request=None) -> tuple[list[str], list[str]]:
    rows = _parse(entries)
    with transaction.atomic():
        pack = TemplatePack.objects.select_for_update().get(pk=pack.pk)
        before = _describe(acl_entries(pack))
        pack.acl.all().delete()
        for row in rows:
            row.pack = pack
        PackAcl.objects.bulk_create(rows)
        after = _describe(acl_entries(pack))
        if before != after:
            audit.record(
                pack_name=pack.name,
                action=PackAuditEvent.Action.ACL,
                user=user,
                request=request,
                summary="ACL changed",
                diff=audit.acl_diff(before, after),
            )
    return before, after
