"""Acting as another user on an API call (`X-Flowport-Proxy-User`).

GaaS asks that authorization can tell "whether a user can proxy": here,
members of the `FLOWPORT_PROXY_GROUP` group may, everyone else gets 403, and
every proxied call leaves a ProxyAuditEvent row.
"""

from __future__ import annotations

from typing import TypeAlias

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.request import Request

from portal.accounts.models import ProxyAuditEvent

PROXY_HEADER = "X-Flowport-Proxy-User"
PROXY_META = "HTTP_X_FLOWPORT_PROXY_USER"
ACTOR_ATTR = "flowport_actor"


def may_proxy(user: User) -> bool:
    group = settings.FLOWPORT_PROXY_GROUP
    return bool(group) and user.is_active and user.groups.filter(name=group).exists()


def apply_proxy(request: HttpRequest, user: User) -> User:
    """The user the call acts as: `user` itself without the header, else the
    named user (audited). Raises 403 for non-members, 400 for an unknown name."""
    target_name = request.META.get(PROXY_META, "").strip()
    if not target_name:
        return user
    if not may_proxy(user):
        raise exceptions.PermissionDenied(f"You may not act as another user ({PROXY_HEADER}).")
    target = get_user_model().objects.filter(username=target_name, is_active=True).first()
    if target is None:
        raise exceptions.ValidationError({PROXY_HEADER: [f"No active user named {target_name!r}."]})
    if target.is_superuser and not user.is_superuser:
        raise exceptions.PermissionDenied("Only a superuser may act as a superuser.")
    ProxyAuditEvent.objects.create(
        actor=user, acting_as=target, method=request.method or "", path=request.path[:2000]
    )
    setattr(request, ACTOR_ATTR, user)
    return target


#: A page's request or an API call's (DRF's Request wraps Django's; audit records read either).
AnyRequest: TypeAlias = HttpRequest | Request


def actor_and_subject(request: AnyRequest | None, user: User) -> tuple[User, User | None]:
    """(who really did it, whom they acted for or None) for audit records."""
    django_request = getattr(request, "_request", request)
    actor = getattr(django_request, ACTOR_ATTR, None)
    if actor is not None and actor.pk != user.pk:
        return actor, user
    return user, None
