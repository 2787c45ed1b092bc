"""Compile endpoints of the flow catalog: GaaS's "logical flow → Gobblin
jobs mapping" (`GET /api/flowconfigs/{group}/{name}/jobs`) and a dry-run
compile (`POST /api/flowconfigs/compile`) that saves nothing."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.access import Principal
from portal.accounts.requests import api_user
from portal.api_fields import StringMapField
from portal.flows import services
from portal.flows.api import FlowConfigSerializer, api_validation_error
from portal.flows.compiler import compile_flow
from portal.flows.models import CompiledJobDag, FlowConfig
from portal.flows.rules import flow_for
from portal.flows.shown import shown_properties

HOP = "flowport.hop."  # the compiler's keys for a hop's nodes: flowport.hop.<role>.<node key>


class JobSpecPlanSerializer(serializers.Serializer):
    jobName = serializers.CharField(help_text="<flowGroup>.<flowName>.<hopIndex>-<source>-to-<destination>")
    hopIndex = serializers.IntegerField()
    sourceNode = serializers.CharField()
    destinationNode = serializers.CharField()
    executor = serializers.CharField()
    technology = serializers.CharField()
    location = serializers.CharField()
    queue = serializers.CharField()
    sparkMaster = serializers.CharField()
    sparkConf = StringMapField()
    parents = serializers.ListField(child=serializers.CharField())
    servesDestinations = serializers.ListField(child=serializers.CharField())
    properties = StringMapField(help_text="Resolved: templates, then flow, then hop keys.")
    errors = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class


class CompiledFlowSerializer(serializers.Serializer):
    flowGroup = serializers.CharField()
    flowName = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    destinations = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=FlowConfig.Compilation.choices)
    message = serializers.CharField()
    executors = serializers.ListField(child=serializers.CharField())
    jobs = JobSpecPlanSerializer(many=True, help_text="In topological order.")
    pinnedVersions = serializers.DictField(child=serializers.IntegerField())
    pendingReasons = serializers.ListField(child=serializers.CharField())
    errors = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    topologyToken = serializers.CharField(allow_null=True)
    compiledAt = serializers.DateTimeField(allow_null=True, required=False)


def _shown(dag: dict, user: Principal) -> dict:
    """The DAG with its jobs' properties as the portal shows them to `user` (:mod:`portal.flows.shown`)."""
    jobs = [{**job, "properties": shown_properties(job["properties"], user)} for job in dag.get("jobs") or []]
    return {**dag, "jobs": jobs}


class FlowJobsView(APIView):
    """The compiled job DAG of a flow, as stored by the last compile."""

    @extend_schema(responses=CompiledFlowSerializer, operation_id="flowconfigs_jobs")
    def get(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = flow_for(request.user, flowGroup, flowName)
        stored = CompiledJobDag.objects.filter(flow=flow).first()
        if stored is None:  # a flow saved before the compiler existed
            return Response({**_shown(compile_flow(flow).to_dict(), request.user), "compiledAt": None})
        verdict = {"status": flow.compilation_status, "message": flow.compilation_message}
        return Response({**_shown(stored.dag, request.user), **verdict, "compiledAt": stored.compiled_at})


class CompileFlowView(APIView):
    """Compile a flow config without saving it, to preview jobs, executors
    and resolved properties (or the reasons it would be pending)."""

    serializer_class = FlowConfigSerializer

    @extend_schema(
        request=FlowConfigSerializer, responses=CompiledFlowSerializer, operation_id="flowconfigs_compile"
    )
    def post(self, request: Request) -> Response:
        serializer = FlowConfigSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        flow = FlowConfig(owner=api_user(request), **serializer.validated_data)
        try:
            flow.full_clean(validate_unique=False)
        except DjangoValidationError as error:
            raise api_validation_error(error) from None
        return Response(
            {**_shown(services.preview(flow, user=request.user).to_dict(), request.user), "compiledAt": None}
        )


urlpatterns = [
    path("flowconfigs/compile", CompileFlowView.as_view(), name="flowconfig-compile"),
    path("flowconfigs/<str:flowGroup>/<str:flowName>/jobs", FlowJobsView.as_view(), name="flowconfig-jobs"),
]
