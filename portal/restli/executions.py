"""`/flowstatuses` (get, the `latestFlowStatus` finder) and `/flowexecutions`
(get, delete = kill, the `resume` action, the `latestFlowExecution` and
`latestFlowGroupExecutions` finders), as Gobblin's FlowStatusClient and
FlowExecutionClient call them. Reads go through orchestration.status (who
may see which execution), kill and resume through orchestration.services.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpResponse, JsonResponse
from rest_framework.request import Request

from portal.orchestration import redaction
from portal.orchestration import services as run_services
from portal.orchestration import status as execution_status
from portal.orchestration.models import Action, ActionKind, FlowExecution
from portal.restli import records
from portal.restli.base import MAX_PAGE, RestLiResource
from portal.restli.errors import RestLiError


def _execution_key(resource: RestLiResource, text: str) -> tuple[str, str, int]:
    """A FlowStatusId key: (flowGroup, flowName, flowExecutionId)."""
    key = resource.key(text)
    key.pop("$params", None)
    try:
        flow_group, flow_name = records.flow_id(key, "key")
        return flow_group, flow_name, int(key["flowExecutionId"])
    except records.ValidationFailure as failure:
        raise RestLiError(400, f"Invalid key: {failure.message}") from None
    except KeyError:
        raise RestLiError(400, "Invalid key: flowExecutionId is required.") from None
    except (TypeError, ValueError):
        raise RestLiError(400, "Invalid key: flowExecutionId must be a whole number.") from None


def _execution(request: Request, resource: RestLiResource, text: str) -> FlowExecution:
    flow_group, flow_name, execution_id = _execution_key(resource, text)
    try:
        return execution_status.find_execution(request.user, execution_id, flow_group, flow_name)
    except Http404:
        raise RestLiError(
            404,
            f"No flow execution found for flowStatusId (flowGroup:{flow_group},flowName:{flow_name},"
            f"flowExecutionId:{execution_id}). The flowStatusId may be incorrect, or the flow "
            "execution may have been cleaned up.",
        ) from None


def _resuming(executions: Sequence[FlowExecution]) -> set[tuple[str, str, int]]:
    """Which of these executions have a RESUME request not handled yet (one
    query over the few waiting actions)."""
    if not executions:
        return set()
    pending = Action.objects.filter(
        done_at__isnull=True,
        kind=ActionKind.RESUME,
        execution_id__in={e.execution_id for e in executions},
    ).values_list("flow_group", "flow_name", "execution_id")
    return set(pending)


def _renderer(request: Request, rows: Sequence[FlowExecution], record, **options):
    """Records of `rows` with their messages as the requesting user may read them
    (portal.orchestration.redaction)."""
    resuming = _resuming(rows)
    shown = redaction.for_viewer(request.user)
    return lambda e: record(
        e, resume_requested=(e.flow_group, e.flow_name, e.execution_id) in resuming, shown=shown, **options
    )


def _positive(query: dict[str, Any], name: str, default: int = 1) -> int:
    try:
        value = int(query.get(name, default))
    except (TypeError, ValueError):
        raise RestLiError(400, f"{name} must be a whole number.") from None
    if not 1 <= value <= MAX_PAGE:
        raise RestLiError(400, f"{name} must be 1 to {MAX_PAGE}.")
    return value


def _boolean(query: dict[str, Any], name: str) -> bool:
    value = str(query.get(name, "false")).lower()
    if value not in ("true", "false"):
        raise RestLiError(400, f"{name} must be true or false.")
    return value == "true"


def _latest_of_flow(request: Request, query: dict[str, Any]) -> QuerySet[FlowExecution]:
    """The newest `count` executions of the finder's `flowId`, optionally of
    one Gobblin `executionStatus`. Flowport jobs carry no tag, so a `tag`
    matches none."""
    flow = query.get("flowId")
    if not isinstance(flow, dict):
        raise RestLiError(400, "The finder needs flowId=(flowGroup:<group>,flowName:<name>).")
    try:
        flow_group, flow_name = records.flow_id(flow, "flowId")
    except records.ValidationFailure as failure:
        raise RestLiError(400, failure.message) from None
    count = _positive(query, "count")
    executions = execution_status.executions_visible_to(request.user).filter(
        flow_group=flow_group, flow_name=flow_name
    )
    if query.get("executionStatus"):
        executions = executions.filter(status__in=records.flowport_statuses(str(query["executionStatus"])))
    if query.get("tag"):
        executions = executions.none()
    return executions.prefetch_related("jobs").order_by("-execution_id")[:count]


class FlowStatusesResource(RestLiResource):
    """Gobblin's deprecated `flowstatuses`: FlowStatus records."""

    resource = "flowstatuses"
    finders = ("latestFlowStatus",)

    def restli_get(self, request: Request, key: str) -> HttpResponse:
        execution = _execution(request, self, key)
        return JsonResponse(_renderer(request, [execution], records.flow_status_record)(execution))

    def finder_latestFlowStatus(self, request: Request, query: dict[str, Any]) -> HttpResponse:
        rows = list(_latest_of_flow(request, query))
        return self.collection(rows, 0, len(rows), _renderer(request, rows, records.flow_status_record))


class FlowExecutionsResource(RestLiResource):
    """Gobblin's `flowexecutions`: FlowExecution records, kill and resume."""

    resource = "flowexecutions"
    finders = ("latestFlowExecution", "latestFlowGroupExecutions")
    entity_actions = ("resume",)

    def restli_get(self, request: Request, key: str) -> HttpResponse:
        execution = _execution(request, self, key)
        render = _renderer(request, [execution], records.flow_execution_record, include_issues=True)
        return JsonResponse(render(execution))

    def restli_delete(self, request: Request, key: str) -> HttpResponse:
        """Kill: a request the orchestrator carries out (as Gobblin's, asynchronous)."""
        return self._request(request, key, run_services.kill)

    def action_resume(self, request: Request, key: str) -> HttpResponse:
        return self._request(request, key, run_services.resume)

    def _request(self, request: Request, key: str, verb) -> HttpResponse:
        execution = _execution(request, self, key)
        execution_status.check_can_act(request.user, execution)
        try:
            verb(execution, user=request.user)
        except run_services.NotAllowedNow as error:
            raise RestLiError(409, str(error)) from None
        return HttpResponse(status=200)

    def finder_latestFlowExecution(self, request: Request, query: dict[str, Any]) -> HttpResponse:
        include_issues = _boolean(query, "includeIssues")
        rows = list(_latest_of_flow(request, query))
        render = _renderer(request, rows, records.flow_execution_record, include_issues=include_issues)
        return self.collection(rows, 0, len(rows), render)

    def finder_latestFlowGroupExecutions(self, request: Request, query: dict[str, Any]) -> HttpResponse:
        """The newest `countPerFlow` executions of each flow of `flowGroup`,
        one query (a window per flow), paged."""
        flow_group = query.get("flowGroup")
        if not isinstance(flow_group, str) or not flow_group:
            raise RestLiError(400, "The finder needs flowGroup=<group>.")
        per_flow = _positive(query, "countPerFlow")
        include_issues = _boolean(query, "includeIssues")
        start, count = self.paging()
        executions = execution_status.executions_visible_to(request.user).filter(flow_group=flow_group)
        if query.get("tag"):
            executions = executions.none()
        ranked = (
            executions.annotate(
                rank=Window(RowNumber(), partition_by=[F("flow_name")], order_by=F("execution_id").desc())
            )
            .filter(Q(rank__lte=per_flow))
            .prefetch_related("jobs")
            .order_by("flow_name", "-execution_id")
        )
        rows = list(ranked[start : start + count + 1])
        render = _renderer(
            request, rows[:count], records.flow_execution_record, include_issues=include_issues
        )
        return self.collection(rows, start, count, render)
