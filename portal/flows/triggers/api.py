"""REST API of a flow's data triggers and freshness goal, and of its webhook token:

    GET/PUT/PATCH /api/flowconfigs/{flowGroup}/{flowName}/triggers
    POST/DELETE   /api/flowconfigs/{flowGroup}/{flowName}/webhook-token

Whoever sees the flow reads its triggers; whoever may change it changes them (flows.rules). The
webhook token is answered once, on POST; afterwards only its first characters are shown."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts import access
from portal.api_fields import StrictCharField
from portal.flows.models import FlowConfig
from portal.flows.rules import flow_for
from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.goals import FRESHNESS_HELP
from portal.flows.triggers.models import MAX_DEBOUNCE_SECONDS, FlowTrigger

API_NAMES = {
    "upstream": "upstream",
    "upstream_mode": "upstreamMode",
    "debounce_seconds": "debounceSeconds",
    "skip_empty": "skipEmpty",
    "on_files": "onFiles",
    "freshness": "freshness",
    "dataset_freshness": "datasetFreshness",
}


class TriggersSerializer(serializers.Serializer):
    upstream = serializers.ListField(
        child=StrictCharField(max_length=800),
        required=False,
        help_text="Upstream datasets: <flowGroup>/<flowName> (any of that flow's destination datasets) "
        "or <flowGroup>/<flowName>/<dataset.urn>. The flow's owner must be able to read them.",
    )
    upstreamMode = serializers.ChoiceField(
        choices=FlowTrigger.Mode.values,
        required=False,
        help_text="any: run when any upstream dataset commits; all: when every one has committed since "
        "the last run they triggered.",
    )
    debounceSeconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_DEBOUNCE_SECONDS,
        required=False,
        help_text="Start this long after the last upstream commit (a burst of commits starts one run).",
    )
    skipEmpty = serializers.BooleanField(
        required=False,
        help_text="An upstream commit that delivered no record does not start the flow (default: it does).",
    )
    onFiles = serializers.BooleanField(
        required=False, help_text="Run when new files arrive in the source folder (a files data node)."
    )
    freshness = StrictCharField(
        allow_blank=True,
        required=False,
        help_text=f"The destination datasets' freshness goal: {FRESHNESS_HELP}.",
    )
    datasetFreshness = serializers.DictField(
        child=StrictCharField(),
        required=False,
        help_text='Goals of single datasets: {"<dataset.urn>": "by 06:00"}, beside freshness (any of the flow\'s).',
    )
    webhook = serializers.BooleanField(read_only=True, help_text="A webhook token exists.")
    webhookHint = serializers.CharField(read_only=True, help_text="The webhook token's first characters.")
    runsWhen = serializers.ListField(child=serializers.CharField(), read_only=True)
    feeds = serializers.ListField(child=serializers.CharField(), read_only=True)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


def _answer(flow: FlowConfig) -> dict[str, Any]:
    found = trigger_services.settings_of(flow)
    return {
        "upstream": found.upstream,
        "upstreamMode": found.upstream_mode,
        "debounceSeconds": found.debounce_seconds,
        "skipEmpty": found.skip_empty,
        "onFiles": found.on_files,
        "freshness": found.freshness,
        "datasetFreshness": found.dataset_freshness,
        "webhook": found.webhook,
        "webhookHint": found.webhook_hint,
        "runsWhen": trigger_services.runs_when(flow),
        "feeds": [str(downstream) for downstream in trigger_services.feeds(flow)],
    }


def _flow(request: Request, flow_group: str, flow_name: str) -> FlowConfig:
    action = access.VIEW if request.method in permissions.SAFE_METHODS else access.CHANGE
    return flow_for(request.user, flow_group, flow_name, action)


class FlowTriggersView(APIView):
    serializer_class = TriggersSerializer

    @extend_schema(responses=TriggersSerializer)
    def get(self, request: Request, flowGroup: str, flowName: str) -> Response:
        return Response(_answer(_flow(request, flowGroup, flowName)))

    @extend_schema(request=TriggersSerializer, responses=TriggersSerializer)
    def put(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = _flow(request, flowGroup, flowName)
        serializer = TriggersSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        sent = {
            model: serializer.validated_data[api]
            for model, api in API_NAMES.items()
            if api in serializer.validated_data
        }
        try:
            trigger_services.save_settings(flow, sent)
        except DjangoValidationError as error:
            raise exceptions.ValidationError(
                {API_NAMES.get(key, key): messages for key, messages in error.message_dict.items()}
            ) from None
        return Response(_answer(flow))

    @extend_schema(request=TriggersSerializer, responses=TriggersSerializer)
    def patch(self, request: Request, flowGroup: str, flowName: str) -> Response:
        return self.put(request, flowGroup, flowName)


class WebhookTokenView(APIView):
    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "WebhookToken", {"token": serializers.CharField(), "url": serializers.CharField()}
            )
        },
    )
    def post(self, request: Request, flowGroup: str, flowName: str) -> Response:
        """A new webhook token, shown only in this answer (an earlier one stops working)."""
        flow = _flow(request, flowGroup, flowName)
        token = trigger_services.create_webhook_token(flow)
        url = request.build_absolute_uri(f"/api/hooks/flows/{flow.flow_group}/{flow.flow_name}")
        return Response({"token": token, "url": url}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, flowGroup: str, flowName: str) -> Response:
        """Revoke the webhook token: calls bearing it are refused from now on."""
        flow = _flow(request, flowGroup, flowName)
        if not trigger_services.revoke_webhook_token(flow):
            raise exceptions.NotFound("The flow has no webhook token.")
        return Response(status=status.HTTP_204_NO_CONTENT)


urlpatterns = [
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/triggers",
        FlowTriggersView.as_view(),
        name="flow-triggers",
    ),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/webhook-token",
        WebhookTokenView.as_view(),
        name="flow-webhook-token",
    ),
]
