"""REST API of the accounts app: who the caller is (and who they act for)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.proxy import actor_and_subject
from portal.accounts.requests import api_user


@extend_schema(
    responses=inline_serializer(
        "Me",
        {
            "username": serializers.CharField(),
            "actor": serializers.CharField(help_text="Who authenticated; differs when proxying."),
            "groups": serializers.ListField(child=serializers.CharField()),
            "isStaff": serializers.BooleanField(),
        },
    )
)
@api_view(["GET"])
def me(request: Request) -> Response:
    """The effective user of this call, e.g. to check a token or a proxy setup."""
    actor, _subject = actor_and_subject(request, api_user(request))
    return Response(
        {
            "username": request.user.get_username(),
            "actor": actor.get_username(),
            "groups": sorted(request.user.groups.values_list("name", flat=True)),
            "isStaff": request.user.is_staff,
        }
    )


urlpatterns = [path("me", me, name="me")]
