"""REST API of a flow's versions, beside its page (`/flows/{g}/{n}/versions/`):

    GET /api/flowconfigs/{flowGroup}/{flowName}/versions            newest first (200 at most)
    GET /api/flowconfigs/{flowGroup}/{flowName}/versions/{number}   its spec and a diff

A version's spec and diff mask secrets as the page does (diffs.redacted_spec, diffs.diff);
whoever may see the flow reads its versions, anyone else gets a 404."""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.flows.models import FlowVersion
from portal.flows.rules import flow_for
from portal.flows.versions import diffs
from portal.flows.versions import services as versions

LISTED = 200
LARGEST = 2**31 - 1  # FlowVersion.number is an integer column

_SUMMARY: dict[str, serializers.Field] = {
    "number": serializers.IntegerField(),
    "createdBy": serializers.CharField(),
    "created": serializers.DateTimeField(),
}


def _summary(version: FlowVersion) -> dict[str, Any]:
    return {"number": version.number, "createdBy": version.created_by, "created": version.created}


class FlowVersionsView(APIView):
    @extend_schema(
        operation_id="flowconfigs_versions_list",
        responses=inline_serializer(
            "FlowVersions",
            {"versions": serializers.ListField(child=inline_serializer("FlowVersionSummary", _SUMMARY))},
        ),
    )
    def get(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = flow_for(request.user, flowGroup, flowName)
        return Response({"versions": [_summary(version) for version in versions.versions_of(flow)[:LISTED]]})


class FlowVersionView(APIView):
    @extend_schema(
        operation_id="flowconfigs_version_retrieve",
        parameters=[
            OpenApiParameter(
                "against", int, description="The version to diff with (default: the one before)."
            )
        ],
        responses=inline_serializer(
            "FlowVersion",
            {
                **_SUMMARY,
                "spec": serializers.DictField(),
                "against": serializers.IntegerField(allow_null=True),
                "diff": serializers.ListField(child=serializers.CharField()),
            },
        ),
    )
    def get(self, request: Request, flowGroup: str, flowName: str, number: int) -> Response:
        flow = flow_for(request.user, flowGroup, flowName)
        # A number past the column's range is no version (and would fail in the database).
        version = versions.versions_of(flow).filter(number=number).first() if number <= LARGEST else None
        if version is None:
            raise exceptions.NotFound(f"The flow has no version {number}.")
        against_text = request.query_params.get("against", "").strip()
        if against_text:
            if not against_text.isdigit() or len(against_text) > 9:  # 9 digits fit the column
                raise exceptions.ValidationError(
                    {"against": [f"A version number (1, 2, …), not {against_text[:40]!r}."]}
                )
            other = versions.versions_of(flow).filter(number=int(against_text)).first()
            if other is None:
                raise exceptions.ValidationError({"against": [f"The flow has no version {against_text}."]})
        else:
            other = versions.versions_of(flow).filter(number__lt=version.number).first()
        return Response(
            {
                **_summary(version),
                "spec": diffs.redacted_spec(version.spec),
                "against": other.number if other is not None else None,
                "diff": diffs.diff(other, version).lines if other is not None else [],
            }
        )


urlpatterns = [
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/versions",
        FlowVersionsView.as_view(),
        name="flow-versions",
    ),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/versions/<int:number>",
        FlowVersionView.as_view(),
        name="flow-version",
    ),
]
