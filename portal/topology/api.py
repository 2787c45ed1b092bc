"""REST API of the topology: `/api/topologies` (SpecExecutors with their
capabilities nested) and `/api/datanodes`. Read for every signed-in user;
executors change by staff; every signed-in user makes data nodes of their own
(topology.policy), which their owners and staff change, share (`acl`) and
delete; access requests and a node's audit history
(`/api/datanodes/{name}/access-requests`, `/history`). Thin: validation and
saving live in topology.services and topology.sharing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

if TYPE_CHECKING:  # a protocol of the DRF stubs only
    from rest_framework.decorators import ViewSetAction

from portal.accounts import access as account_access
from portal.accounts.access import StaffOrReadOnly
from portal.accounts.requests import api_user
from portal.api_errors import Conflict
from portal.api_fields import StrictCharField, StringMapField
from portal.topology import grants, nodefields, services, sharing
from portal.topology.models import Capability, DataNode, DataNodeAccessRequest, SpecExecutor


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
        required=False,
        default=dict,
        help_text="Connection properties; secret values only as ENC(...), none inside a URL "
        "(user:pass@, password=). Shown whole to staff and the node's owners, credentials masked to others.",
    )
    acl = serializers.ListField(
        child=serializers.DictField(child=StrictCharField(max_length=150)),
        required=False,
        help_text="Grants: [{role: owner|read|write, user|group: name}] (a PUT/PATCH with acl replaces them; "
        "a user-made node keeps at least one owner).",
    )
    owner = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=150,
        write_only=True,
        help_text="Making a node of your own: the group that owns it (one of yours); empty: you.",
    )
    secrets = StringMapField(
        required=False,
        write_only=True,
        help_text="Credentials in clear text, e.g. {password: …}: stored as ENC(...) under the owner's "
        "customer key (one is made if they have none), never shown again.",
    )
    userMade = serializers.BooleanField(source="user_made", read_only=True)
    createdBy = serializers.CharField(source="created_by.username", read_only=True, allow_null=True)
    owners = serializers.SerializerMethodField(
        help_text="Whom to ask for access: users, and groups as 'group <name>'."
    )
    origin = serializers.CharField(read_only=True, help_text="Topology file it was loaded from, if any.")
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)

    def get_owners(self, instance: DataNode) -> list[str]:
        return [
            entry.get("user") or f"group {entry['group']}"
            for entry in self._grants(instance)
            if entry["role"] == "owner"
        ]

    def _grants(self, instance: DataNode) -> list[dict[str, str]]:
        """The node's grants, read once per node for both `acl` and `owners`."""
        read: dict[int, list[dict[str, str]]] = self.__dict__.setdefault("_grant_entries", {})
        if instance.pk not in read:
            read[instance.pk] = grants.grant_entries(instance)
        return read[instance.pk]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["acl"] = self._grants(instance) if isinstance(instance, DataNode) else []
        if isinstance(instance, DataNode):
            data["properties"] = self._credential_view().properties(instance)
        return data

    def _credential_view(self) -> nodefields.CredentialView:
        """The viewset's, one per request (a list reads the caller's owned nodes once)."""
        view = self.context.get("credential_view")
        if view is None:
            view = nodefields.CredentialView(getattr(self.context.get("request"), "user", None))
        return view


class CapabilitySerializer(serializers.Serializer):
    source = StrictCharField(max_length=128, source="source.name")  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    destination = StrictCharField(max_length=128, source="destination.name")

    def validate(self, attrs):
        """A PATCH is partial about the executor's fields, never about one capability:
        DRF's partial mode skips missing nested fields, and half an edge is no edge."""
        missing = [name for name in ("source", "destination") if name not in attrs]
        if missing:
            raise serializers.ValidationError({name: ["This field is required."] for name in missing})
        return attrs


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
    enabled = serializers.BooleanField(
        required=False,
        default=True,
        help_text=(
            "false disables it at once, without asking (the portal's page asks first): the flows "
            "routed through it are recompiled in the background and each goes to pending unless "
            "another enabled executor can run its hops."
        ),
    )
    cost = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, default=100)
    userSources = StrictCharField(
        source="user_sources",
        max_length=100,
        allow_blank=True,
        required=False,
        default="",
        help_text="Kinds of user-made data nodes it reads from (jdbc,files,iceberg), into every node it writes to.",
    )
    userDestinations = StrictCharField(
        source="user_destinations",
        max_length=100,
        allow_blank=True,
        required=False,
        default="",
        help_text="Kinds of user-made data nodes it writes to, from every node it reads from.",
    )
    capabilities = CapabilitySerializer(many=True, required=False)
    health = HealthSerializer(source="*", read_only=True)
    origin = serializers.CharField(read_only=True)
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)


EXECUTOR_API_NAMES = {
    "spark_master": "sparkMaster",
    "spark_conf": "sparkConf",
    "health_status": "health",
    "user_sources": "userSources",
    "user_destinations": "userDestinations",
}


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
    """Lists the administrators' nodes and the user-made ones the caller holds a grant on (staff:
    all); any node by name, its credentials masked but to staff and its owners."""

    serializer_class = DataNodeSerializer
    permission_classes = [permissions.IsAuthenticated]

    def get_queryset(self):
        nodes = grants.listed_nodes(self.request.user) if self.action == "list" else DataNode.objects.all()
        return nodes.select_related("created_by")

    def get_serializer_context(self) -> dict[str, Any]:
        view = nodefields.CredentialView(self.request.user)
        return {**super().get_serializer_context(), "credential_view": view}

    def _changeable(self, action: str) -> DataNode:
        name = self.kwargs["name"]
        verb = "delete" if action == account_access.DELETE else "change"
        return account_access.get_allowed(
            DataNode.objects.all(),
            self.request.user,
            action,
            denied=f"Only the owners of data node {name} (and staff) may {verb} it.",
            missing="No such data node.",
            name=name,
        )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            node = services.create_data_node(serializer.validated_data, user=request.user, request=request)
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, partial: bool = False, **kwargs):
        node = self._changeable(account_access.CHANGE)
        serializer = self.get_serializer(node, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        try:
            node = services.update_data_node(
                node, serializer.validated_data, user=request.user, request=request
            )
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(self.get_serializer(node).data)

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def destroy(self, request, *args, **kwargs):
        node = self._changeable(account_access.DELETE)
        try:
            services.delete_data_node(node, user=request.user, request=request)
        except DjangoValidationError as error:
            raise Conflict(" ".join(error.messages)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccessRequestSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    role = serializers.ChoiceField(choices=DataNodeAccessRequest.Role.choices, default="read")
    message = StrictCharField(max_length=500, allow_blank=True, required=False, default="")
    requestedBy = serializers.CharField(source="requested_by.username", read_only=True, allow_null=True)
    created = serializers.DateTimeField(read_only=True)
    decided = serializers.DateTimeField(source="decided_at", read_only=True)
    decidedBy = serializers.CharField(source="decided_by.username", read_only=True, allow_null=True)
    granted = serializers.BooleanField(read_only=True, allow_null=True)


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["grant", "decline"])


class NodeAuditEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    action = serializers.CharField()
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True)
    onBehalfOf = serializers.CharField(source="on_behalf_of.username", read_only=True, allow_null=True)
    summary = serializers.CharField()
    diff = serializers.CharField()


def _node(name: str) -> DataNode:
    return get_object_or_404(DataNode, name=name)


class AccessRequestsView(APIView):
    """Ask a node's owners for read or write (any signed-in user); its owners and staff see the
    open requests, everyone else their own."""

    @extend_schema(responses={200: AccessRequestSerializer(many=True)})
    def get(self, request, name: str) -> Response:
        node = _node(name)
        asked = node.access_requests.select_related("requested_by", "decided_by")
        if not sharing.may_share(request.user, node):
            asked = asked.filter(requested_by=request.user)
        else:
            asked = asked.filter(decided_at__isnull=True)
        return Response(AccessRequestSerializer(asked, many=True).data)

    @extend_schema(request=AccessRequestSerializer, responses={201: AccessRequestSerializer})
    def post(self, request, name: str) -> Response:
        node = _node(name)
        serializer = AccessRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            asked = sharing.request_access(
                node, user=api_user(request), request=request, **serializer.validated_data
            )
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(AccessRequestSerializer(asked).data, status=status.HTTP_201_CREATED)


class AnswerRequestView(APIView):
    """An owner (or staff) grants or declines one open request."""

    @extend_schema(
        request=DecisionSerializer,
        responses={200: AccessRequestSerializer},
        operation_id="datanodes_access_requests_answer",
    )
    def post(self, request, name: str, request_id: int) -> Response:
        node = _node(name)
        if not sharing.may_share(request.user, node):
            raise exceptions.PermissionDenied(
                f"Only owners of data node {name} (and staff) may answer requests."
            )
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        grant = serializer.validated_data["decision"] == "grant"
        try:
            asked = sharing.decide(node, request_id, user=api_user(request), grant_it=grant, request=request)
        except DjangoValidationError as error:
            raise api_error(error, {}) from None
        return Response(AccessRequestSerializer(asked).data)


class NodeHistoryView(APIView):
    """A node's audit trail, newest first: for its owners, those granted it, and staff."""

    @extend_schema(responses={200: NodeAuditEventSerializer(many=True)})
    def get(self, request, name: str) -> Response:
        node = _node(name)
        usable = grants.may_use(request.user, name, grants.READ) or grants.may_use(
            request.user, name, grants.WRITE
        )
        if not (usable or sharing.may_share(request.user, node)):
            raise exceptions.PermissionDenied(f"Only those granted data node {name} read its history.")
        return Response(NodeAuditEventSerializer(sharing.history(node)[:500], many=True).data)


@extend_schema_view(
    create=extend_schema(
        responses={201: SpecExecutorSerializer, 400: OpenApiResponse(description="Invalid")}
    ),
)
class SpecExecutorViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, _ByName
):
    """SpecExecutors (GaaS's TopologySpecs) with their capabilities."""

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
    path(
        "datanodes/<str:name>/access-requests", AccessRequestsView.as_view(), name="datanode-access-requests"
    ),
    path(
        "datanodes/<str:name>/access-requests/<int:request_id>",
        AnswerRequestView.as_view(),
        name="datanode-answer-request",
    ),
    path("datanodes/<str:name>/history", NodeHistoryView.as_view(), name="datanode-history"),
]
