"""REST API of the topology: `/api/topologies` (SpecExecutors with their
capabilities nested) and `/api/datanodes`. Read for every signed-in user,
changes for staff. Thin: validation and saving live in topology.services."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.response import Response

if TYPE_CHECKING:  # a protocol of the DRF stubs only
    from rest_framework.decorators import ViewSetAction

from portal.accounts.access import StaffOrReadOnly
from portal.api_errors import Conflict
from portal.api_fields import StrictCharField, StringMapField
from portal.topology import access, services
from portal.topology.models import Capability, DataNode, SpecExecutor


class TopologyStaffOrReadOnly(StaffOrReadOnly):
    message = "Only staff can change the topology."


def api_error(error: DjangoValidationError, api_names: dict[str, str]) -> exceptions.ValidationError:
    """Model/service errors reported under the API's camelCase field names."""
    if hasattr(error, "error_dict"):
        return exceptions.ValidationError(
            {api_names.get(field, field): messages for field, messages in error.message_dict.items()}
        )
    return exceptions.ValidationError({"non_field_errors": error.messages})


class DataNodeSerializer(serializers.Serializer):
    name = StrictCharField(max_length=128)
    kind = serializers.ChoiceField(choices=DataNode.Kind.choices, default=DataNode.Kind.FILES)
    description = StrictCharField(allow_blank=True, required=False, default="")
    properties = StringMapField(
        required=False, default=dict, help_text="Connection properties; secret values only as ENC(...)."
    )
    acl = serializers.ListField(
        child=serializers.DictField(child=StrictCharField(max_length=150)),
        required=False,
        help_text="Grants: [{role: owner|read|write, user|group: name}] (a PUT/PATCH with acl replaces them).",
    )
    origin = serializers.CharField(read_only=True, help_text="Topology file it was loaded from, if any.")
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["acl"] = access.grant_entries(instance) if isinstance(instance, DataNode) else []
        return data


class CapabilitySerializer(serializers.Serializer):
    source = StrictCharField(max_length=128, source="source.name")  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    destination = StrictCharField(max_length=128, source="destination.name")


class HealthSerializer(serializers.Serializer):
    status = serializers.CharField(source="health_status")
    message = serializers.CharField(source="health_message")
    lastHeartbeat = serializers.DateTimeField(source="last_heartbeat", allow_null=True)


class SpecExecutorSerializer(serializers.Serializer):
    name = StrictCharField(max_length=128)
    uri = StrictCharField(max_length=500, allow_blank=True, required=False, default="")
    technology = serializers.ChoiceField(
        choices=SpecExecutor.Technology.choices, default=SpecExecutor.Technology.SPARK_LOCAL
    )
    location = StrictCharField(max_length=128, allow_blank=True, required=False, default="")
    queue = StrictCharField(
        max_length=200,
        allow_blank=True,
        required=False,
        default="",
        help_text="Communication mechanism: the Celery queue; executor.<name> if empty.",
    )
    sparkMaster = StrictCharField(source="spark_master", max_length=500, required=False, default="local[*]")
    sparkConf = StringMapField(source="spark_conf", required=False, default=dict)
    description = StrictCharField(allow_blank=True, required=False, default="")
    enabled = serializers.BooleanField(required=False, default=True)
    cost = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, default=100)
    capabilities = CapabilitySerializer(many=True, required=False)
    health = HealthSerializer(source="*", read_only=True)
    origin = serializers.CharField(read_only=True)
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)


EXECUTOR_API_NAMES = {"spark_master": "sparkMaster", "spark_conf": "sparkConf", "health_status": "health"}


def _pairs(validated: dict) -> list[tuple[str, str]] | None:
    items = validated.pop("capabilities", None)
    if items is None:
        return None
    return [(item["source"]["name"], item["destination"]["name"]) for item in items]


class _ByName(viewsets.GenericViewSet):
    permission_classes = [TopologyStaffOrReadOnly]
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9_.-]{1,128}"

    def get_object(self):
        return get_object_or_404(self.get_queryset(), name=self.kwargs["name"])


@extend_schema_view(
    create=extend_schema(responses={201: DataNodeSerializer, 400: OpenApiResponse(description="Invalid")}),
    destroy=extend_schema(
        responses={204: None, 409: OpenApiResponse(description="Still used by capabilities")}
    ),
)
class DataNodeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, _ByName):
    serializer_class = DataNodeSerializer
    queryset = DataNode.objects.all()

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            node = services.create_data_node(serializer.validated_data)
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, partial: bool = False, **kwargs):
        node = self.get_object()
        serializer = self.get_serializer(node, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        try:
            node = services.update_data_node(node, serializer.validated_data)
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(self.get_serializer(node).data)

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def perform_destroy(self, instance: DataNode) -> None:
        try:
            services.delete_data_node(instance)
        except DjangoValidationError as error:
            raise Conflict(" ".join(error.messages)) from None


@extend_schema_view(
    create=extend_schema(
        responses={201: SpecExecutorSerializer, 400: OpenApiResponse(description="Invalid")}
    ),
)
class SpecExecutorViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, _ByName
):
    """SpecExecutors (the seed's TopologySpecs) with their capabilities."""

    serializer_class = SpecExecutorSerializer
    queryset = SpecExecutor.objects.prefetch_related(
        Prefetch("capabilities", queryset=Capability.objects.select_related("source", "destination"))
    )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        try:
            executor = services.create_executor(data, capabilities=_pairs(data) or [])
        except DjangoValidationError as error:
            raise api_error(error, EXECUTOR_API_NAMES) from None
        return Response(self.get_serializer(self._fresh(executor)).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, partial: bool = False, **kwargs):
        executor = self.get_object()
        serializer = self.get_serializer(executor, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        try:
            executor = services.update_executor(executor, data, capabilities=_pairs(data))
        except DjangoValidationError as error:
            raise api_error(error, EXECUTOR_API_NAMES) from None
        return Response(self.get_serializer(self._fresh(executor)).data)

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def perform_destroy(self, instance: SpecExecutor) -> None:
        services.delete_executor(instance)

    def _fresh(self, executor: SpecExecutor) -> SpecExecutor:
        return self.get_queryset().get(pk=executor.pk)


DETAIL: dict[str, str | ViewSetAction[Any]] = {
    "get": "retrieve",
    "put": "update",
    "patch": "partial_update",
    "delete": "destroy",
}
urlpatterns = [
    path("topologies", SpecExecutorViewSet.as_view({"get": "list", "post": "create"}), name="topology-list"),
    path("topologies/<str:name>", SpecExecutorViewSet.as_view(DETAIL), name="topology-detail"),
    path("datanodes", DataNodeViewSet.as_view({"get": "list", "post": "create"}), name="datanode-list"),
    path("datanodes/<str:name>", DataNodeViewSet.as_view(DETAIL), name="datanode-detail"),
]
