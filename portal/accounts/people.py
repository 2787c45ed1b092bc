"""Staff manage the portal's own users and groups from its pages, not from a shell or Django's
admin (which looks like another product): list, create with a password, deactivate, set groups.

Where an LDAP directory signs users in, it owns them: django-auth-ldap mirrors each user's groups
from the directory at every login, so a membership set here would be undone at the next one. The
pages then only show who is in which group and say where users come from.

The rules live here, so a page cannot skip one: staff only; nobody deactivates themselves (the
portal would lose its last administrator as easily as its first); only a superuser changes a
superuser.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q, QuerySet

from portal.accounts.access import Principal
from portal.accounts.backends import directory_description

User = get_user_model()


def directory_managed() -> bool:
    """True when an LDAP directory signs users in (LDAP_SERVER_URI set and its backend on)."""
    return bool(getattr(settings, "AUTH_LDAP_SERVER_URI", "")) and (
        "portal.accounts.backends.DirectoryBackend" in settings.AUTHENTICATION_BACKENDS
    )


def where_users_come_from() -> str:
    return directory_description().replace("Sign in with", "Users sign in with")


def require_staff(user: Principal) -> None:
    if not (getattr(user, "is_authenticated", False) and user.is_active and user.is_staff):
        raise PermissionDenied("Only staff manage users and groups.")


def require_local(user: Principal) -> None:
    """Staff, and users made here (not the directory's)."""
    require_staff(user)
    if directory_managed():
        raise PermissionDenied(
            "Users and their groups come from the LDAP directory: change them there; "
            "these pages only show them."
        )


def users(query: str = "") -> QuerySet[Any]:
    found = User.objects.order_by("username")
    query = query.strip()[:100]
    if query:
        found = found.filter(
            Q(username__icontains=query) | Q(email__icontains=query) | Q(groups__name__iexact=query)
        ).distinct()
    return found.prefetch_related("groups")


def groups() -> QuerySet[Group]:
    return Group.objects.annotate(members=Count("user")).order_by("name")


def _may_change(actor: Principal, target: Any) -> None:
    require_local(actor)
    if target.is_superuser and not actor.is_superuser:
        raise PermissionDenied(f"Only a superuser changes the superuser {target.username}.")


def set_active(actor: Principal, target: Any, active: bool) -> None:
    """Deactivate (they can no longer sign in, nor use their API tokens) or reactivate."""
    _may_change(actor, target)
    if target.pk == actor.pk and not active:
        raise ValidationError({"is_active": ["You cannot deactivate yourself; ask another staff member."]})
    target.is_active = active
    target.save(update_fields=["is_active"])


def set_groups(actor: Principal, target: Any, chosen: list[Group]) -> None:
    _may_change(actor, target)
    target.groups.set(chosen)


def may_change(actor: Principal, target: Any) -> bool:
    try:
        _may_change(actor, target)
    except PermissionDenied:
        return False
    return True
