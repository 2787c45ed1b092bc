"""Request types for annotations, as django-stubs recommends for logged-in views.

Django and DRF build the requests; these classes are never instantiated. They
tell the type checker what the login check and django-htmx's middleware
guarantee: behind ``login_required`` (or DRF's IsAuthenticated) the user is a
real ``User``, never ``AnonymousUser``, and every request carries ``htmx``.
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails
from rest_framework.request import Request


class HtmxRequest(HttpRequest):
    """Any request: django-htmx's middleware sets ``htmx`` on each one."""

    htmx: HtmxDetails


class AuthenticatedRequest(HtmxRequest):
    """A page request past ``login_required``."""

    user: User


def api_user(request: Request) -> User:
    """The user of an API call. DRF's default permission (IsAuthenticated, settings)
    lets only signed-in users through, so this is never AnonymousUser."""
    return cast(User, request.user)
