"""Who may read, use or edit a template pack, registered with the access
module (accounts.access) in TemplatepacksConfig.ready.

Owners (users or groups) edit the pack and its ACL; readers (users or
groups) use its templates in flows; staff see every pack; superusers may
also edit every pack. Everyone else cannot see the pack at all (404)."""

from __future__ import annotations

from django.db.models import Q

from portal.accounts import access
from portal.accounts.access import Principal
from portal.templatepacks.models import TemplatePack


def pack_rule(user: Principal, action: str) -> Q:
    if user.is_superuser or (action == access.VIEW and user.is_staff):
        return Q()
    group_ids = list(user.groups.values_list("pk", flat=True))
    principal = Q(acl__user=user) | Q(acl__group__in=group_ids)
    if action == access.VIEW:
        return principal
    return principal & Q(acl__role="owner")


def register() -> None:
    access.register(TemplatePack, pack_rule, distinct=True)
