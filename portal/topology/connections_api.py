"""REST API of Test connection and discovery: `POST /api/datanodes/{name}/test`
and `POST /api/datanodes/{name}/discover`, as on the node's page. Only for a
user granted the node (anyone else: 404). A connection that fails is an
answer (200 with `ok: false` and the driver's message), not an API error."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_fields import StrictCharField
from portal.topology import access, connections
from portal.topology.models import DataNode


class CredentialsSerializer(serializers.Serializer):
    user = StrictCharField(required=False, allow_blank=True, default="", max_length=256)
    password = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=1024,
        write_only=True,
        help_text="JDBC: for this test only, never stored (the URL's own user/password otherwise).",
    )


class ConnectionResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField(help_text="The driver's or the system's own message on failure.")
    schemas = serializers.ListField(child=serializers.CharField())


class ColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    watermarkSuitable = serializers.BooleanField(source="watermark_suitable")


class DatasetSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="schema.table, or a data file's path under the node's root.")
    note = serializers.CharField()
    columns = ColumnSerializer(many=True)


class DiscoverySerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField()
    truncated = serializers.BooleanField(help_text="Only the first tables or files are listed.")
    datasets = DatasetSerializer(many=True)


def _usable_node(request, name: str) -> DataNode:
    node = get_object_or_404(DataNode, name=name)
    if not (
        access.may_use(request.user, name, access.READ) or access.may_use(request.user, name, access.WRITE)
    ):
        raise Http404("No such data node.")
    return node


def _credentials(request) -> dict[str, str]:
    serializer = CredentialsSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class TestConnectionView(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        request=CredentialsSerializer,
        responses={200: ConnectionResultSerializer, 404: OpenApiResponse(description="No such node for you")},
    )
    def post(self, request, name: str) -> Response:
        """Test connection: files, the root exists and is readable; JDBC, connect and list the schemas."""
        node = _usable_node(request, name)
        result = connections.test_connection(node, **_credentials(request))
        return Response(ConnectionResultSerializer(result).data)


class DiscoverView(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        request=CredentialsSerializer,
        responses={200: DiscoverySerializer, 404: OpenApiResponse(description="No such node for you")},
    )
    def post(self, request, name: str) -> Response:
        """The tables (JDBC) or data files (files) the node holds, with their columns and types."""
        node = _usable_node(request, name)
        found = connections.discover(node, **_credentials(request))
        return Response(DiscoverySerializer(found).data)


urlpatterns = [
    path("datanodes/<str:name>/test", TestConnectionView.as_view(), name="datanode-test"),
    path("datanodes/<str:name>/discover", DiscoverView.as_view(), name="datanode-discover"),
]
