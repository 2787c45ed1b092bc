"""REST API of Test connection and discovery: `POST /api/datanodes/{name}/test`
and `POST /api/datanodes/{name}/discover`, as on the node's page. Only for a
user granted the node (anyone else: 403, as the node itself is visible to them:
they ask its owners for access). A connection that fails is an answer (200
with `ok: false` and the driver's message), not an API error."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_fields import StrictCharField
from portal.topology import connections, grants, nodefields
from portal.topology.models import DataNode


class CredentialsSerializer(serializers.Serializer):
    user = StrictCharField(required=False, allow_blank=True, default="", max_length=256)
    password = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=1024,
        write_only=True,
        help_text="JDBC, a node without an account of its own: for this test only, never stored (the URL's "
        "own user/password otherwise). A node's own account is always the one used.",
    )


class ConnectionResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField(help_text="The driver's or the system's own message on failure.")
    schemas = serializers.ListField(child=serializers.CharField())


class ColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(
        help_text="The database's own type (JDBC, Iceberg), the Parquet footer's, or for CSV and JSON "
        "lines the type Spark infers from a sample (bigint, decimal(p,0), double, boolean, date, "
        "timestamp, string, array<...>, struct<...>)."
    )
    watermarkSuitable = serializers.BooleanField(
        source="watermark_suitable",
        help_text="Of a type a watermark can follow as a cursor: an integer, a date or a "
        "timestamp (not a numeric/decimal amount nor a float).",
    )
    watermarkCandidate = serializers.BooleanField(
        source="watermark_candidate",
        help_text="Likely to grow with new rows: an identity/serial/auto-increment column, a single "
        "integer primary key, a timestamp or a date (JDBC and Iceberg tables).",
    )
    candidateReason = serializers.CharField(
        source="candidate", help_text="Why it is a candidate ('' when it is not one)."
    )
    primaryKey = serializers.BooleanField(source="in_primary_key", help_text="Part of the primary key.")


class DatasetSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="schema.table, or a data file's path under the node's root.")
    note = serializers.CharField(help_text="Where the columns come from (the catalog, a sample's size).")
    columns = ColumnSerializer(many=True)
    primaryKey = serializers.ListField(
        source="primary_key",
        child=serializers.CharField(),
        help_text="The primary key's columns in key order, from the catalog "
        "(for extract.primary.key.fields); empty for files.",
    )
    watermarkCandidates = serializers.ListField(
        source="watermark_candidate_names",
        child=serializers.CharField(),
        help_text="Columns offered first as the watermark (extract.delta.fields).",
    )
    watermarkSource = serializers.ChoiceField(
        source="watermark_source",
        choices=["column", "file_modification_time"],
        help_text="A table's watermark is one of its columns; a files source's is the files' "
        "modification time.",
    )
    modifiedAt = serializers.DateTimeField(
        source="modified_at", allow_null=True, help_text="A data file's modification time (null for tables)."
    )


class DiscoverySerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField()
    truncated = serializers.BooleanField(help_text="Only the first tables or files are listed.")
    datasets = DatasetSerializer(many=True)


def _usable_node(request, name: str) -> DataNode:
    node = get_object_or_404(DataNode, name=name)
    if not (
        grants.may_use(request.user, name, grants.READ) or grants.may_use(request.user, name, grants.WRITE)
    ):
        raise exceptions.PermissionDenied(
            f"You hold no grant on data node {name}; ask its owners (POST /api/datanodes/{name}/access-requests)."
        )
    return node


def _credentials(request) -> dict[str, str]:
    serializer = CredentialsSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class TestConnectionView(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        request=CredentialsSerializer,
        responses={200: ConnectionResultSerializer, 403: OpenApiResponse(description="Not granted to you")},
    )
    def post(self, request, name: str) -> Response:
        """Test connection: files, the root exists and is readable; JDBC, connect and list the schemas."""
        node = _usable_node(request, name)
        result = connections.test_connection(node, **_credentials(request))
        result.message = nodefields.without_root(request.user, node, result.message)
        return Response(ConnectionResultSerializer(result).data)


class DiscoverView(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        request=CredentialsSerializer,
        responses={200: DiscoverySerializer, 403: OpenApiResponse(description="Not granted to you")},
    )
    def post(self, request, name: str) -> Response:
        """The tables (JDBC) or data files (files) the node holds, with their columns and types."""
        node = _usable_node(request, name)
        found = connections.discover(node, **_credentials(request))
        found.message = nodefields.without_root(request.user, node, found.message)
        return Response(DiscoverySerializer(found).data)


urlpatterns = [
    path("datanodes/<str:name>/test", TestConnectionView.as_view(), name="datanode-test"),
    path("datanodes/<str:name>/discover", DiscoverView.as_view(), name="datanode-discover"),
]
