"""Replacing a pack's ACL: validated whole, stored in one transaction, audited."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from portal.accounts.grants import parse_principal_grants
from portal.templatepacks import audit
from portal.templatepacks.models import PackAcl, PackAuditEvent, TemplatePack

ROLES = {choice for choice, _label in PackAcl.Role.choices}


def acl_entries(pack: TemplatePack) -> list[dict[str, str]]:
    """The ACL as plain entries, sorted, e.g. {"role": "owner", "user": "alice"}."""
    entries = []
    for entry in pack.acl.select_related("user", "group"):
        if entry.user is not None:
            entries.append({"role": entry.role, "user": entry.user.username})
        elif entry.group is not None:
            entries.append({"role": entry.role, "group": entry.group.name})
    return sorted(entries, key=lambda e: (e["role"], "user" in e, e.get("user") or e.get("group")))


def _describe(entries: list[dict[str, str]]) -> list[str]:
    return [
        f"{e['role']} {'user' if 'user' in e else 'group'}:{e.get('user') or e.get('group')}" for e in entries
    ]


def _changes(before: list[str], after: list[str]) -> str:
    """What an ACL change did, in a line: the history's heading already says it was the ACL."""
    added = [e for e in after if e not in before]
    removed = [e for e in before if e not in after]
    parts = [f"{', '.join(added)} added"] if added else []
    parts += [f"{', '.join(removed)} removed"] if removed else []
    return "; ".join(parts)


def _parse(entries: Any) -> list[PackAcl]:
    rows = parse_principal_grants(entries, PackAcl, roles=ROLES, field="entries")
    if not any(row.role == PackAcl.Role.OWNER for row in rows):
        raise ValidationError({"entries": ["A pack needs at least one owner."]})
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
                summary=_changes(before, after),
                diff=audit.acl_diff(before, after),
            )
    return before, after
