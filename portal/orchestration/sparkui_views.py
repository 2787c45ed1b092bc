"""The proxy to a running job's Spark UI (orchestration.sparkui): staff only, GET only, the job's
recorded UI only, while the job runs."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseNotFound
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from portal.accounts.requests import AuthenticatedRequest
from portal.orchestration import sparkui, status


@login_required
@require_GET
def spark_ui(
    request: AuthenticatedRequest,
    flow_group: str,
    flow_name: str,
    execution_id: int,
    job_name: str,
    path: str = "",
) -> HttpResponse:
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    if not status.can_see_spark_ui(request.user, execution):
        raise PermissionDenied(status.SPARK_UI_STAFF_ONLY)
    job = get_object_or_404(execution.jobs, job_name=job_name)
    origin = sparkui.recorded_ui(job)
    if origin is None:
        return HttpResponseNotFound(
            f"{job_name} has no Spark UI to show: the portal reaches it only while the job runs "
            f"(it is {job.status}) on a worker whose session has its UI on (SPARK_UI_ENABLED).",
            content_type="text/plain; charset=utf-8",
        )
    context = reverse("orchestration:spark_ui", args=[flow_group, flow_name, execution_id, job_name])
    try:
        answer = sparkui.fetch(
            origin,
            sparkui.ui_path(path),
            sparkui.ui_query(request.META.get("QUERY_STRING", "")),
            context.rstrip("/"),
        )
    except sparkui.RefusedPath as refused:
        return HttpResponseBadRequest(str(refused), content_type="text/plain; charset=utf-8")
    except sparkui.UnreachableUI as error:
        return HttpResponse(str(error), status=502, content_type="text/plain; charset=utf-8")
    response = HttpResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    response["Cache-Control"] = "private, no-store"  # staff's reading, never a shared cache's
    return response
