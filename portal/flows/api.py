"""REST API for the flow catalog: `/api/flowconfigs`, with the seed's camelCase
names and its Rest.li key form `(flowGroup:g,flowName:n)`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Exists, OuterRef
from django.urls import path, re_path
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response

if TYPE_CHECKING:  # a protocol of the DRF stubs only
    from rest_framework.decorators import ViewSetAction

from portal.accounts import access
from portal.api_errors import Conflict
from portal.api_fields import StrictCharField, StringMapField
from portal.flows import services
from portal.flows.filters import FlowConfigFilterSet
from portal.flows.models import FlowConfig, FlowRefresh
from portal.flows.rules import CHANGE_DENIED

# API name → model field; errors from the model are reported under API names.
API_FIELDS = {
    "flowGroup": "flow_group",
    "flowName": "flow_name",
    "description": "description",
    "schedule": "schedule",
    "runImmediately": "run_immediately",
    "templateUris": "template_uris",
    "properties": "properties",
    "source": "source",
    "destinations": "destinations",
    "paused": "paused",
}
MODEL_TO_API = {model: api for api, model in API_FIELDS.items()}


class CompilationSerializer(serializers.Serializer):
    status = serializers.CharField(source="compilation_status")
    message = serializers.CharField(source="compilation_message")
    # True while a topology change's background recompile of the flow is queued.
    refreshing = serializers.BooleanField(read_only=True, default=False)


class FlowConfigSerializer(serializers.Serializer):
    flowGroup = StrictCharField(source="flow_group", max_length=128, required=False)
    flowName = StrictCharField(source="flow_name", max_length=128, required=False)
    description = StrictCharField(allow_blank=True, required=False, default="")
    schedule = StrictCharField(
        allow_blank=True,
        required=False,
        default="",
        help_text="Unix cron (5 fields) or Quartz (6-7 fields, converted); empty = run once, as soon as "
        "it is saved (Gobblin's run-once flow; created with paused=true it waits for Run now).",
    )
    runImmediately = serializers.BooleanField(source="run_immediately", required=False, default=False)
    templateUris = StrictCharField(
        source="template_uris",
        allow_blank=True,
        required=False,
        default="",
        help_text="Comma-separated template URIs: pack://<pack>/<path>.template or FS:///<path>.template.",
    )
    templateNames = StrictCharField(
        write_only=True, required=False, help_text="Alias of templateUris used by the seed's examples."
    )
    templateName = StrictCharField(write_only=True, required=False, help_text="Alias of templateUris.")
    properties = StringMapField(required=False, default=dict)
    source = StrictCharField(allow_blank=True, required=False, default="")  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    destinations = serializers.ListField(child=StrictCharField(), required=False, default=list)
    owner = serializers.CharField(source="owner.username", read_only=True)
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)
    compilation = CompilationSerializer(source="*", read_only=True)
    # No default: a PUT or PATCH that leaves it out leaves the switch alone.
    paused = serializers.BooleanField(
        required=False,
        help_text="Airflow's on/off switch: a paused flow's schedule makes no executions; "
        "on resume the ticks missed meanwhile follow its flow.catchUpPolicy.",
    )
    pausedAt = serializers.DateTimeField(source="paused_at", read_only=True, allow_null=True)
    pausedBy = serializers.CharField(source="paused_by", read_only=True)

    def validate(self, attrs: dict) -> dict:
        aliases = [attrs.pop("templateNames", None), attrs.pop("templateName", None)]
        alias = next((value for value in aliases if value), None)
        if alias and not attrs.get("template_uris"):
            attrs["template_uris"] = alias
        if self.instance is None:
            missing = {
                api: ["This field is required."]
                for api, field in (("flowGroup", "flow_group"), ("flowName", "flow_name"))
                if not attrs.get(field)
            }
            if missing:
                raise serializers.ValidationError(missing)
        return attrs


def api_validation_error(error: DjangoValidationError) -> exceptions.ValidationError:
    if hasattr(error, "error_dict"):
        return exceptions.ValidationError(
            {MODEL_TO_API.get(field, field): messages for field, messages in error.message_dict.items()}
        )
    return exceptions.ValidationError({"non_field_errors": error.messages})


@extend_schema_view(
    create=extend_schema(
        responses={201: FlowConfigSerializer, 409: OpenApiResponse(description="Key exists")}
    ),
)
class FlowConfigViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = FlowConfigSerializer
    filterset_class = FlowConfigFilterSet
    lookup_url_kwarg = "flowName"

    def get_queryset(self):
        return (
            FlowConfig.objects.restrict(self.request.user)
            .select_related("owner")
            .annotate(refreshing=Exists(FlowRefresh.objects.filter(flow=OuterRef("pk"))))
        )

    def get_object(self) -> FlowConfig:
        action = access.VIEW if self.request.method in permissions.SAFE_METHODS else access.CHANGE
        return access.get_allowed(
            self.get_queryset(),
            self.request.user,
            action,
            denied=CHANGE_DENIED,
            flow_group=self.kwargs["flowGroup"],
            flow_name=self.kwargs["flowName"],
        )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            flow = services.create_flow(owner=request.user, data=serializer.validated_data)
        except DjangoValidationError as error:
            raise api_validation_error(error) from None
        except services.FlowAlreadyExists as error:
            raise Conflict(str(error)) from None
        return Response(self.get_serializer(flow).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, partial: bool = False, **kwargs):
        flow = self.get_object()
        serializer = self.get_serializer(flow, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        try:
            flow = services.update_flow(flow, data=serializer.validated_data, by=request.user.get_username())
        except DjangoValidationError as error:
            raise api_validation_error(error) from None
        except services.FlowKeyChange as error:
            raise exceptions.ValidationError({MODEL_TO_API[error.field]: [str(error)]}) from None
        return Response(self.get_serializer(flow).data)

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def perform_destroy(self, instance: FlowConfig) -> None:
        services.delete_flow(instance)


@extend_schema(exclude=True)
class RestLiFlowConfigViewSet(FlowConfigViewSet):
    """The seed's `/flowconfigs/(flowGroup:g,flowName:n)` form; same behaviour."""


DETAIL_ACTIONS: dict[str, str | ViewSetAction[Any]] = {
    "get": "retrieve",
    "put": "update",
    "patch": "partial_update",
    "delete": "destroy",
}
_KEY = r"[A-Za-z0-9_.-]{1,128}"

urlpatterns = [
    path("flowconfigs", FlowConfigViewSet.as_view({"get": "list", "post": "create"}), name="flowconfig-list"),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>",
        FlowConfigViewSet.as_view(DETAIL_ACTIONS),
        name="flowconfig-detail",
    ),
    re_path(
        rf"^flowconfigs/\(flowGroup:(?P<flowGroup>{_KEY}),flowName:(?P<flowName>{_KEY})\)$",
        RestLiFlowConfigViewSet.as_view(DETAIL_ACTIONS),
    ),
    re_path(
        rf"^flowconfigs/\(flowName:(?P<flowName>{_KEY}),flowGroup:(?P<flowGroup>{_KEY})\)$",
        RestLiFlowConfigViewSet.as_view(DETAIL_ACTIONS),
    ),
]
