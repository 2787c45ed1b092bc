"""`POST /api/hooks/flows/{flowGroup}/{flowName}` with `Authorization: Bearer <the flow's webhook
token>`: run the flow now (202 with the flowExecutionId). The token alone authenticates: no
session, no API token, no CSRF. Every refusal (no such flow, no token, a wrong, another flow's or a
revoked token) is the same 404, so a caller learns nothing about which flows exist."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.orchestration.control import triggers

REFUSED = "No such flow, or its webhook token is missing, wrong or revoked."


def _bearer(request: Request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class FlowWebhookView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        request=None,
        responses={
            202: inline_serializer("WebhookRun", {"flowExecutionId": serializers.IntegerField()}),
            404: None,
            409: None,
        },
    )
    def post(self, request: Request, flowGroup: str, flowName: str) -> Response:
        try:
            execution = triggers.call_webhook(flowGroup, flowName, _bearer(request))
        except triggers.WebhookRefused:
            return Response({"detail": REFUSED}, status=status.HTTP_404_NOT_FOUND)
        except triggers.WebhookNotRun as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"flowExecutionId": execution.execution_id}, status=status.HTTP_202_ACCEPTED)


urlpatterns = [
    path("hooks/flows/<str:flowGroup>/<str:flowName>", FlowWebhookView.as_view(), name="flow-webhook"),
]
