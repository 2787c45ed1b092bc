"""The one place that decides who may read, use or edit a template pack.

Pages, the API and the flow compiler all ask here. Owners (users or groups)
edit the pack and its ACL; readers (users or groups) use its templates in
flows; staff see every pack; superusers may also edit every pack. Everyone
else cannot see the pack at all (404).
"""

from __future__ import annotations

from django.db.models import Q

READ = "read"  # see the pack and use its templates
EDIT = "edit"  # change templates, upload, roll back, change the ACL, delete


def pack_filter(user, action: str) -> Q:
    """A filter on TemplatePack for the packs `user` may `action`."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Q(pk__in=[])
    if user.is_superuser or (action == READ and user.is_staff):
        return Q()
    group_ids = list(user.groups.values_list("pk", flat=True))
    principal = Q(acl__user=user) | Q(acl__group__in=group_ids)
    if action == EDIT:
        return principal & Q(acl__role="owner")
    return principal


def can(user, action: str, pack) -> bool:
    from portal.templatepacks.models import TemplatePack

    return TemplatePack.objects.filter(pk=pack.pk).filter(pack_filter(user, action)).exists()


def can_read(user, pack) -> bool:
    return can(user, READ, pack)


def can_edit(user, pack) -> bool:
    return can(user, EDIT, pack)
