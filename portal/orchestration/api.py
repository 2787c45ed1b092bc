"""REST API of the orchestration app: GaaS's `/flowstatuses` (last known
status of a flow, also in its Rest.li key form), execution history and
detail (`/flowexecutions`), kill and resume, and run-now
(`/flowconfigs/{flowGroup}/{flowName}/run`).

Access follows the flow's: every user who may see a flow reads its
executions; its owner and staff run it and kill or resume its executions
(portal.orchestration.status). Kill, resume and run are requests: they are
stored as action rows for the orchestrator and answered with 202 and the
execution as it is now (`pendingRequests` shows the queued request).

An execution id (`flowExecutionId`, epoch milliseconds) is unique per flow
only. `GET /flowexecutions/{executionId}` and its kill/resume take optional
`flowGroup` and `flowName` query parameters; without them, an id that two
flows you can see share is a 400 naming those parameters and the flows.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import path, re_path, reverse
from django.utils.http import urlencode
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_errors import Conflict
from portal.orchestration import services
from portal.orchestration import status as execution_status
from portal.orchestration.control import cdc
from portal.orchestration.filters import FlowExecutionFilterSet
from portal.orchestration.models import FlowExecution
from portal.orchestration.pagination import CappedPageNumberPagination
from portal.orchestration.serializers import (
    FlowExecutionSerializer,
    FlowStatusSerializer,
    RunRequestSerializer,
)
from portal.orchestration.state import statestore

NOT_FOUND = OpenApiResponse(description="No such flow or execution (or not visible to you).")
FORBIDDEN = OpenApiResponse(description="Only the flow's owner or staff may do this.")
QUOTA_EXCEEDED = OpenApiResponse(
    description="A quota refuses it: the body names the quota, whose it is, the limit and the use."
)
FLOW_PARAMETERS = [
    OpenApiParameter(
        "flowGroup", str, description="The execution's flow group, when its id is shared by several flows."
    ),
    OpenApiParameter(
        "flowName", str, description="The execution's flow name, when its id is shared by several flows."
    ),
]


def _execution_location(execution: FlowExecution) -> str:
    url = reverse("flowexecution-detail", kwargs={"executionId": execution.execution_id})
    return f"{url}?{urlencode({'flowGroup': execution.flow_group, 'flowName': execution.flow_name})}"


class FlowStatusView(APIView):
    """The last known status of a flow: its latest execution with its jobs."""

    @extend_schema(
        operation_id="flowstatuses_retrieve",
        responses={200: FlowStatusSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, flowGroup: str, flowName: str) -> Response:
        execution = execution_status.last_status(request.user, flowGroup, flowName)
        return Response(FlowStatusSerializer(execution, context={"request": request}).data)


@extend_schema(exclude=True)
class RestLiFlowStatusView(FlowStatusView):
    """GaaS's `/FlowStatuses/(flowGroup:g,flowName:n)` form; same answer."""


@extend_schema_view(
    list=extend_schema(
        operation_id="flowexecutions_list",
        description="Executions newest first (the flows you can see); filters combine.",
        responses={200: FlowExecutionSerializer(many=True), 400: OpenApiResponse(description="Bad filter")},
    )
)
class FlowExecutionViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """History of flow executions, newest first, and one execution's status."""

    serializer_class = FlowExecutionSerializer
    filterset_class = FlowExecutionFilterSet
    pagination_class = CappedPageNumberPagination
    lookup_url_kwarg = "executionId"

    def get_queryset(self):
        return execution_status.executions_visible_to(self.request.user).order_by("-execution_id", "-pk")

    def get_object(self) -> FlowExecution:
        params = self.request.query_params
        flow_group, flow_name = params.get("flowGroup") or None, params.get("flowName") or None
        try:
            return execution_status.find_execution(
                self.request.user, self.kwargs["executionId"], flow_group, flow_name
            )
        except execution_status.AmbiguousExecutionId as error:
            missing = [
                name for name, value in (("flowGroup", flow_group), ("flowName", flow_name)) if not value
            ]
            raise exceptions.ValidationError({name: [str(error)] for name in missing}) from None

    @extend_schema(
        operation_id="flowexecutions_retrieve",
        parameters=FLOW_PARAMETERS,
        responses={
            200: FlowStatusSerializer,
            400: OpenApiResponse(description="Ambiguous id"),
            404: NOT_FOUND,
        },
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return Response(FlowStatusSerializer(self.get_object(), context=self.get_serializer_context()).data)

    def _request(self, verb) -> Response:
        execution = self.get_object()
        execution_status.check_can_act(self.request.user, execution)
        try:
            verb(execution, user=self.request.user)
        except services.NotAllowedNow as error:
            raise Conflict(str(error)) from None
        fresh = execution_status.flow_execution(
            self.request.user, execution.flow_group, execution.flow_name, execution.execution_id
        )
        return Response(
            FlowStatusSerializer(fresh, context=self.get_serializer_context()).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(
        operation_id="flowexecutions_kill",
        description="Ask the orchestrator to cancel the execution's jobs (202: queued).",
        request=None,
        parameters=FLOW_PARAMETERS,
        responses={
            202: FlowStatusSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(description="The execution has already finished."),
        },
    )
    def kill(self, request: Request, *args, **kwargs) -> Response:
        return self._request(services.kill)

    @extend_schema(
        operation_id="flowexecutions_resume",
        description="Re-run the failed, cancelled and skipped jobs of a failed or cancelled execution; "
        "with `?job=<jobName>`, only that failed job and the jobs it kept from running (Airflow's "
        "clear task: committed parents are not re-run).",
        request=None,
        parameters=[
            *FLOW_PARAMETERS,
            OpenApiParameter("job", str, description="Re-run only this failed or cancelled job."),
        ],
        responses={
            202: FlowStatusSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(description="Only a failed or cancelled execution can be resumed."),
        },
    )
    def resume(self, request: Request, *args, **kwargs) -> Response:
        if job_name := request.query_params.get("job"):
            return self._request(lambda execution, user: services.rerun_job(execution, job_name, user=user))
        return self._request(services.resume)


class RunFlowView(APIView):
    """Run a flow now, or backfill some of its datasets between watermarks."""

    @extend_schema(
        operation_id="flowconfigs_run",
        request=RunRequestSerializer,
        responses={
            202: FlowStatusSerializer,
            400: OpenApiResponse(description="Invalid backfill"),
            403: FORBIDDEN,
            404: NOT_FOUND,
            503: QUOTA_EXCEEDED,
        },
    )
    def post(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = execution_status.visible_flow(request.user, flowGroup, flowName, "change")
        serializer = RunRequestSerializer(data={} if request.data is None else request.data)
        serializer.is_valid(raise_exception=True)
        try:
            execution = services.run_now(
                flow, user=request.user, backfill=serializer.validated_data.get("backfill")
            )
        except DjangoValidationError as error:
            raise exceptions.ValidationError(error.message_dict) from None
        return Response(
            FlowStatusSerializer(execution, context={"request": request}).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": _execution_location(execution)},
        )


class ResnapshotView(APIView):
    """Ask a change-data-capture flow for a new snapshot: the captured tables' positions are
    cleared (audited as watermark resets) and the next run reads them whole again, after the
    server lost the slot or the binlog the flow needed. Nothing else re-snapshots a flow."""

    @extend_schema(
        operation_id="flowconfigs_resnapshot",
        request=None,
        responses={
            200: OpenApiResponse(description='{"cleared": [<tables whose position was cleared>]}'),
            400: OpenApiResponse(description="The flow does not capture changes"),
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(description="A table has unfinished commit steps; let them finish first"),
        },
    )
    def post(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = execution_status.visible_flow(request.user, flowGroup, flowName, "change")
        try:
            cleared = cdc.resnapshot(flow, user=request.user)
        except cdc.NotCapturing as error:
            raise exceptions.ValidationError({"flow": [str(error)]}) from None
        except statestore.PendingCommitSteps as error:
            raise Conflict(str(error)) from None
        return Response({"cleared": cleared})


class AdoptStateView(APIView):
    """Adopt the watermarks and state history a deleted flow of the same
    group/name left: a re-created flow starts fresh unless its owner (who
    owned the deleted one too) or staff asks for this."""

    @extend_schema(
        operation_id="flowconfigs_adopt_state",
        request=None,
        responses={
            200: OpenApiResponse(description='{"adopted": <datasets>}'),
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                description="Nothing to adopt, not yours to adopt, or the flow has its own state"
            ),
        },
    )
    def post(self, request: Request, flowGroup: str, flowName: str) -> Response:
        flow = execution_status.visible_flow(request.user, flowGroup, flowName, "change")
        try:
            adopted = statestore.adopt_state(flow, user=request.user)
        except statestore.AdoptionRefused as error:
            raise Conflict(str(error)) from None
        return Response({"adopted": adopted})


_KEY = r"[A-Za-z0-9_.-]{1,128}"
urlpatterns = [
    path("flowstatuses/<str:flowGroup>/<str:flowName>", FlowStatusView.as_view(), name="flowstatus-detail"),
    re_path(
        rf"^flowstatuses/\(flowGroup:(?P<flowGroup>{_KEY}),flowName:(?P<flowName>{_KEY})\)$",
        RestLiFlowStatusView.as_view(),
    ),
    re_path(
        rf"^flowstatuses/\(flowName:(?P<flowName>{_KEY}),flowGroup:(?P<flowGroup>{_KEY})\)$",
        RestLiFlowStatusView.as_view(),
    ),
    path("flowexecutions", FlowExecutionViewSet.as_view({"get": "list"}), name="flowexecution-list"),
    path(
        "flowexecutions/<int:executionId>",
        FlowExecutionViewSet.as_view({"get": "retrieve"}),
        name="flowexecution-detail",
    ),
    path(
        "flowexecutions/<int:executionId>/kill",
        FlowExecutionViewSet.as_view({"post": "kill"}),
        name="flowexecution-kill",
    ),
    path(
        "flowexecutions/<int:executionId>/resume",
        FlowExecutionViewSet.as_view({"post": "resume"}),
        name="flowexecution-resume",
    ),
    path("flowconfigs/<str:flowGroup>/<str:flowName>/run", RunFlowView.as_view(), name="flowconfig-run"),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/resnapshot",
        ResnapshotView.as_view(),
        name="flowconfig-resnapshot",
    ),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>/adopt-state",
        AdoptStateView.as_view(),
        name="flowconfig-adopt-state",
    ),
]
