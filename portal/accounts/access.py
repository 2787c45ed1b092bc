"""The one place that decides who may do what to which object.

Each app registers the rule of its objects at start-up (`AppConfig.ready`):
a function of (user, action) giving the filter on the model's rows that user
may act on. This module imports no app above accounts; pages, API calls and
services all ask it the same way:

    Model.objects.restrict(user, action)        # AccessQuerySet: only the rows allowed
    restrict(Group.objects.all(), user, action) # the same for a model not ours
    get_allowed(queryset, user, action, ...)    # 404 if the user cannot see it, 403 if they
                                                # see it but may not `action` it
    can(user, action, obj)                      # services re-check on writes
    staff_required / StaffOrReadOnly            # pages and API of staff-only catalogs

Anonymous or inactive users are refused everything here, whatever a rule says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Self, TypeAlias, TypeGuard, TypeVar

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db import models
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework import permissions

VIEW = "view"  # see it (for packs: and use its templates)
CHANGE = "change"  # edit it (for packs: templates, upload, roll back, ACL)
DELETE = "delete"
ACTIONS = (VIEW, CHANGE, DELETE)
# The template packs' words for the same actions.
READ, EDIT = VIEW, CHANGE

Model = TypeVar("Model", bound=models.Model)
#: Whoever asks: a signed-in account or the anonymous visitor (the type of ``request.user``).
Principal: TypeAlias = User | AnonymousUser
QS = TypeVar("QS", bound="models.QuerySet[Any]")
Rule = Callable[[Any, str], Q]


@dataclass(frozen=True)
class _Registered:
    rule: Rule
    distinct: bool  # the rule's filter joins to-many rows (an ACL): de-duplicate


_rules: dict[str, _Registered] = {}


def register(model: type[models.Model], rule: Rule, *, distinct: bool = False) -> None:
    """Make `rule(user, action)` decide access to `model`'s rows. Called once
    per model from its app's AppConfig.ready; the user given is signed in and
    active."""
    _rules[model._meta.label] = _Registered(rule, distinct)


def is_account(user: object) -> TypeGuard[User]:
    """A user's account (not the anonymous visitor, not None): what a model's user field holds."""
    return isinstance(user, User)


def account(user: Principal) -> User:
    """The account acting, for what records who did it (an owner, a maker, an auditor's
    actor): the anonymous visitor is refused here whatever the caller checked before. Whether
    the account may act is the rules' to say; a deactivated owner's flows still run."""
    if not is_account(user):
        raise PermissionDenied("Sign in to do this.")
    return user


def registered(model: type[models.Model]) -> bool:
    return model._meta.label in _rules


def allowed(user: Principal | None, action: str, model: type[models.Model]) -> Q | None:
    """The filter on `model` for the rows `user` may `action`; None for nothing."""
    entry = _rules.get(model._meta.label)
    if entry is None:
        raise ImproperlyConfigured(f"No access rule registered for {model._meta.label}.")
    if action not in ACTIONS:
        raise ValueError(f"Unknown action {action!r}; use one of {', '.join(ACTIONS)}.")
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return entry.rule(user, action)


def restrict(queryset: QS, user: Principal | None, action: str = VIEW) -> QS:
    """Only the rows of `queryset` that `user` may `action`. For the models
    this project does not define (auth's Group) and so cannot give an
    AccessQuerySet; the others say `queryset.restrict(user, action)`."""
    condition = allowed(user, action, queryset.model)
    if condition is None:
        return queryset.none()
    if not condition:  # Q(): every row, and no needless WHERE
        return queryset
    queryset = queryset.filter(condition)
    return queryset.distinct() if _rules[queryset.model._meta.label].distinct else queryset


class AccessQuerySet(models.QuerySet):
    """The queryset of every model with an access rule."""

    def restrict(self, user: Principal | None, action: str = VIEW) -> Self:
        return restrict(self, user, action)


def can(user: Principal, action: str, obj: models.Model) -> bool:
    """May `user` `action` this object? (One query; services re-check writes.)"""
    return restrict(type(obj)._default_manager.filter(pk=obj.pk), user, action).exists()


def get_allowed(
    queryset: models.QuerySet[Model],
    user: Principal,
    action: str = VIEW,
    *,
    denied: str = "",
    missing: str = "",
    **lookup: Any,
) -> Model:
    """The object found by `lookup`: 404 (with the `missing` message) if
    `user` cannot see it, 403 (with the `denied` message) if they see it but
    may not `action` it. Views and viewsets both use it, so a page and the
    API give the same answer."""
    obj = restrict(queryset, user, VIEW).filter(**lookup).first()
    if obj is None:
        raise Http404(missing or f"No {queryset.model._meta.object_name} matches the given query.")
    if action != VIEW and not can(user, action, obj):
        raise PermissionDenied(denied or f"You may not {action} this {queryset.model._meta.verbose_name}.")
    return obj


def staff_required(message: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Pages only staff may use: anonymous users go to the login page,
    signed-in non-staff get 403 with `message`."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_staff:
                raise PermissionDenied(message)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


class StaffOrReadOnly(permissions.BasePermission):
    """The API of a catalog every signed-in user reads and staff change."""

    message = "Only staff can change this."

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.is_staff


def staff_only(user: Principal, action: str) -> Q:
    """A rule: every signed-in user sees the rows, staff change them."""
    return Q() if action == VIEW or user.is_staff else Q(pk__in=[])
