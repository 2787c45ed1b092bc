"""Execution pages. Thin: they read through orchestration.status, act through
orchestration.services, and render. Each page serves both the whole page
and, for htmx, the fragment it includes; a fragment polls itself every 2s
only while something in it is unfinished, and re-renders without the
trigger once everything finished, so polling stops by itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from portal.accounts.requests import AuthenticatedRequest, HtmxRequest
from portal.flows.versions import services as versions
from portal.orchestration import badrecords, outputs, redaction, services, status
from portal.orchestration.control import replays
from portal.orchestration.filters import FlowExecutionFilterSet
from portal.orchestration.forms import BackfillForm
from portal.orchestration.models import (
    FINISHED_STATUSES,
    RESUMABLE_STATUSES,
    DatasetState,
    FlowExecution,
    JobStatus,
    delivered,
)
from portal.orchestration.pagination import CappedPaginator
from portal.orchestration.state import joblogs, logview
from portal.orchestration.state import tries as job_tries
from portal.pipeline import backfills as backfill_bounds
from portal.quotas.services import QuotaExceeded

PAGE_SIZE = 25
FLOW_PAGE_SIZE = 10


def _execution_url(execution: FlowExecution) -> str:
    return reverse(
        "orchestration:execution", args=[execution.flow_group, execution.flow_name, execution.execution_id]
    )


def _go(request: HtmxRequest, url: str) -> HttpResponse:
    """After a POST: a plain redirect, or HX-Redirect for htmx (a 302 would
    be followed into the fragment)."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _unfinished(executions) -> bool:
    return any(execution.status not in FINISHED_STATUSES for execution in executions)


def _local_input(filterset: FlowExecutionFilterSet, name: str) -> str:
    """A time filter as a datetime-local input shows it (epoch ms or ISO in
    the query string both come back as local time)."""
    if not filterset.is_valid():
        return filterset.data.get(name, "")
    millis = filterset.form.cleaned_data.get(name)
    if millis is None:
        return ""
    moment = timezone.localtime(datetime.fromtimestamp(millis / 1000, tz=UTC))
    return moment.strftime("%Y-%m-%dT%H:%M")


@login_required
@require_GET
@vary_on_headers("HX-Request")
def execution_list(request: AuthenticatedRequest) -> HttpResponse:
    filterset = FlowExecutionFilterSet(
        request.GET, queryset=status.executions_visible_to(request.user).order_by("-execution_id", "-pk")
    )
    executions = filterset.qs if filterset.is_valid() else FlowExecution.objects.none()
    page = CappedPaginator(executions, PAGE_SIZE).get_page(request.GET.get("page"))
    job_tries.count_earlier(page)  # the rows say which runs needed more than one try
    context = {
        "filter": filterset,
        "since_value": _local_input(filterset, "since"),
        "until_value": _local_input(filterset, "until"),
        "page": page,
        "polling": _unfinished(page),
        "refresh_url": request.get_full_path(),
    }
    code = 400 if filterset.errors else 200
    if request.htmx:
        return render(request, "orchestration/partials/execution_table.html", context, status=code)
    return render(request, "orchestration/execution_list.html", context, status=code)


def _detail_context(request: HttpRequest, execution: FlowExecution, pending: list[str]) -> dict:
    can_act = status.can_act(request.user, execution)
    hops = status.dag_by_hop(execution, spark_ui=status.can_see_spark_ui(request.user, execution))
    return {
        "execution": execution,
        "hops": hops,
        "unconsumed": status.waiting_without_worker(hops),
        "delivered": delivered(execution.jobs.all()),
        "outputs": outputs.of_execution(execution, request.user),
        "finished": status.is_finished(execution),
        # A finished execution with a request waiting (resume) changes soon: keep refreshing.
        "live": not status.is_finished(execution) or bool(pending),
        "pending": pending,
        "can_run": can_act and execution.flow_id is not None,
        "can_kill": can_act and services.can_kill(execution) and "KILL" not in pending,
        "can_resume": can_act and services.can_resume(execution) and "RESUME" not in pending,
        # Per failed job: re-run it alone (services.rerun_job re-checks the job's status).
        "can_rerun_jobs": can_act and execution.status in RESUMABLE_STATUSES and "RESUME" not in pending,
        "flow_exists": execution.flow_id is not None,
        "can_read_data": can_act,  # its bad records are the flow's data: its owners' and staff's
        "current_version": versions.latest_number(execution.flow) if can_act and execution.flow else None,
    }


@login_required
@require_GET
@vary_on_headers("HX-Request")
def execution_detail(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int
) -> HttpResponse:
    pending = status.pending_requests(flow_group, flow_name, execution_id)  # first: see its docstring
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    context = _detail_context(request, execution, pending)
    if request.htmx:
        return render(request, "orchestration/partials/execution_status.html", context)
    return render(request, "orchestration/execution_detail.html", context)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def job_log(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str
) -> HttpResponse:
    """A job attempt's worker and Spark driver logs; `?attempt=N` picks an
    earlier attempt. Polls itself while the attempt runs. Staff read them
    whole; everyone else without server paths and tracebacks."""
    execution, job, attempt = _job_attempt(request, flow_group, flow_name, execution_id, job_name)
    live = attempt == job.attempt and job.status == JobStatus.RUNNING
    wanted = logview.LogFilter.from_params(request.GET)
    shown = redaction.for_viewer(request.user)
    sections = [
        dataclasses.replace(section, text=shown(section.text))
        for section in joblogs.attempt_logs(job, attempt, live=live)
    ]
    error = joblogs.attempt_error(job, attempt, sections)
    context = {
        "execution": execution,
        "job": job,
        "attempt": attempt,
        "error": error and dataclasses.replace(error, message=shown(error.message)),
        "attempts": range(1, job.attempt + 1),
        "sections": [
            (section, logview.apply(section.text, wanted) if wanted.active else None) for section in sections
        ],
        "live": live,
        "filter": wanted,
        "levels": logview.LEVELS,
    }
    if request.htmx:
        return render(request, "orchestration/partials/job_log.html", context)
    return render(request, "orchestration/job_log.html", context, status=400 if wanted.errors else 200)


def _job_attempt(
    request: HttpRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str
) -> tuple[FlowExecution, Any, int]:
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    job = get_object_or_404(execution.jobs, job_name=job_name)
    try:
        attempt = int(request.GET.get("attempt") or job.attempt)
    except ValueError:
        raise Http404("attempt must be a number") from None
    if not 1 <= attempt <= max(job.attempt, 1):
        raise Http404(f"{job_name} has no attempt {attempt}")
    return execution, job, attempt


@login_required
@require_POST
def job_rerun(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str
) -> HttpResponse:
    """Airflow's "clear task": one failed job (and what it kept from running) again."""
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    return _request(
        request,
        execution,
        lambda e, user: services.rerun_job(e, job_name, user=user),
        f"Re-run of {job_name} requested; its committed parents are kept.",
    )


@login_required
@require_GET
def job_log_download(
    request: HttpRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str
) -> HttpResponseBase:
    """`?attempt=N&log=worker|driver`: that log as a file, whole when this
    host can read it (masked), else the masked tail the worker stored; for
    everyone but staff without server paths and tracebacks, line by line."""
    _execution, job, attempt = _job_attempt(request, flow_group, flow_name, execution_id, job_name)
    kind = request.GET.get("log", "worker")
    if kind not in ("worker", "driver"):
        return HttpResponseBadRequest("log must be worker or driver.")
    download = joblogs.attempt_log_download(job, attempt, kind)
    shown = redaction.for_viewer(request.user)
    if download.path is not None and not shown.everything:
        stream = StreamingHttpResponse(shown.file(download.path), content_type="text/plain; charset=utf-8")
        stream["Content-Disposition"] = f'attachment; filename="{download.filename}"'
        return stream
    if download.path is not None:
        return FileResponse(
            download.path.open("rb"),
            as_attachment=True,
            filename=download.filename,
            content_type="text/plain",
        )
    if not download.text:
        raise Http404(f"Nothing logged in the {kind} log of {job_name}'s attempt {attempt}.")
    response = HttpResponse(shown(download.text), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{download.filename}"'
    return response


def _request(request: HtmxRequest, execution: FlowExecution, verb: Callable, done: str) -> HttpResponse:
    status.check_can_act(request.user, execution)
    try:
        verb(execution, user=request.user)
    except services.NotAllowedNow as error:
        messages.error(request, str(error))
    else:
        messages.success(request, done)
    return _go(request, _execution_url(execution))


@login_required
@require_POST
def execution_kill(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int
) -> HttpResponse:
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    return _request(
        request,
        execution,
        services.kill,
        f"Kill of execution {execution.execution_id} requested; its jobs are being cancelled.",
    )


@login_required
@require_POST
def execution_resume(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int
) -> HttpResponse:
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    return _request(
        request,
        execution,
        services.resume,
        f"Resume of execution {execution.execution_id} requested; its failed jobs run again.",
    )


@login_required
@require_POST
def execution_rerun(
    request: AuthenticatedRequest, flow_group: str, flow_name: str, execution_id: int
) -> HttpResponse:
    """Run an old execution's flow again with the version it ran or the current one (`version`), or
    read again exactly what a committed execution loaded, replacing it (`version=replay`)."""
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    status.check_can_act(request.user, execution)
    version = request.POST.get("version", "")
    try:
        if version == "replay":
            new = replays.replay(execution, user=request.user)
            messages.success(
                request,
                f"Execution {new.execution_id} reads again what execution {execution.execution_id} "
                "loaded; its destinations replace those rows instead of adding them.",
            )
            return _go(request, _execution_url(new))
        new = services.rerun_execution(execution, user=request.user, version=version)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return _go(request, _execution_url(execution))
    except services.NotAllowedNow as error:
        messages.error(request, str(error))
        return _go(request, _execution_url(execution))
    except QuotaExceeded as refused:
        messages.error(request, f"Not started: {refused.message}")
        return _go(request, _execution_url(execution))
    which = f"version {new.pinned_version}" if new.pinned_version else "the current version"
    messages.success(request, f"Execution {new.execution_id} of {execution.flow} started with {which}.")
    return _go(request, _execution_url(new))


@login_required
@require_POST
def flow_run(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = status.visible_flow(request.user, flow_group, flow_name, "change")
    try:
        execution = services.run_now(flow, user=request.user)
    except ValidationError as error:  # run_now validates only a backfill; none is given here
        messages.error(request, " ".join(error.messages))
        return _go(request, reverse("orchestration:flow_executions", args=[flow_group, flow_name]))
    except QuotaExceeded as refused:
        messages.error(request, f"Not started: {refused.message}")
        return _go(request, reverse("orchestration:flow_executions", args=[flow_group, flow_name]))
    if running := services.execution_in_the_way(flow, besides=execution):
        messages.warning(
            request,
            f"Execution {execution.execution_id} will be skipped: {services.skipped_because(running)}",
        )
    else:
        messages.success(request, f"Execution {execution.execution_id} of {flow} started.")
    return _go(request, _execution_url(execution))


BACKFILL_DATASETS_SHOWN = 200


@login_required
@require_http_methods(["GET", "POST"])
def flow_backfill(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    """Backfill one dataset between two watermarks (the API's `backfill`):
    an execution that reads that range again without moving the stored
    watermark. Lists the flow's datasets and their watermarks to pick from."""
    flow = status.visible_flow(request.user, flow_group, flow_name, "change")
    posted = request.method == "POST"
    initial = {"dataset": request.GET.get("dataset", ""), "high": request.GET.get("high", "")}
    form = BackfillForm(request.POST if posted else None, initial=initial)
    preview: list[dict[str, str]] = []
    estimate = None
    if posted and form.is_valid() and "preview" in request.POST:
        [(urn, span)] = form.backfill().items()
        if reason := services.backfill_refusal(flow, urn, span["low"], str(span["high"])):
            form.add_error(None, reason)
        else:
            preview = services.backfill_preview(flow, urn, span["low"], str(span["high"]))
            estimate = services.backfill_estimate(flow, urn, span["low"], str(span["high"]))
    elif posted and form.is_valid():
        try:
            execution = services.run_now(flow, user=request.user, backfill=form.backfill())
        except ValidationError as error:
            form.add_error(None, error.message_dict.get("backfill", error.messages))
        except QuotaExceeded as refused:
            form.add_error(None, f"Not started: {refused.message}")
        else:
            messages.success(request, f"Backfill execution {execution.execution_id} of {flow} started.")
            return redirect(_execution_url(execution))
    datasets = list(
        DatasetState.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name)
        .order_by("dataset_urn", "job_name")
        .values("dataset_urn", "job_name", "watermark", "updated")[:BACKFILL_DATASETS_SHOWN]
    )
    # "Backfill this" fills the range's end with the stored one, as a person reads it.
    listed = [
        {
            **d,
            "bound": backfill_bounds.as_bound(d["watermark"]),
        }
        for d in datasets
    ]
    context = {
        "flow": flow,
        "form": form,
        "datasets": listed,
        "more": len(datasets) == BACKFILL_DATASETS_SHOWN,
        "preview": preview,
        "estimate": estimate,
    }
    status_code = 400 if posted and form.errors else 200
    return render(request, "orchestration/flow_backfill.html", context, status=status_code)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def flow_executions(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    """One flow's recent executions: the fragment the flow page includes
    (it loads itself from here), or a page of its own without htmx."""
    flow = status.visible_flow(request.user, flow_group, flow_name)
    executions = job_tries.count_earlier(
        status.executions_visible_to(request.user)
        .filter(flow=flow)
        .order_by("-execution_id", "-pk")[:FLOW_PAGE_SIZE]
    )
    upcoming = status.upcoming_of(flow)
    context = {
        "flow": flow,
        "flow_executions": executions,
        "flow_upcoming": upcoming,
        "flow_executions_loaded": True,
        # An upcoming tick turns into a run at its time: the card follows it.
        "flow_executions_polling": _unfinished(executions) or bool(upcoming),
        "can_run_flow": status.can_run(request.user, flow),
    }
    if request.htmx:
        return render(request, "orchestration/_flow_executions.html", context)
    return render(request, "orchestration/flow_executions.html", context)


@login_required
@require_GET
def job_bad_records(
    request: HttpRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str
) -> HttpResponseBase:
    """The records a job's tasks could not read and set aside, as one JSON-lines download (each
    with its reason, source file and line, and the run); for whoever may act on the execution."""
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    if not status.can_act(request.user, execution):
        raise PermissionDenied(
            "Only the flow's owners and staff may read its bad records: they are its data."
        )
    job = get_object_or_404(execution.jobs, job_name=job_name)
    paths = badrecords.files(job.task_states, execution.execution_id)
    if not paths:
        raise Http404(f"No file of {job_name}'s bad records is readable on this host.")
    response = StreamingHttpResponse(badrecords.lines(paths), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{execution_id}-{job_name}-bad-records.jsonl"'
    return response


@login_required
@require_GET
def dataset_preview(
    request: HttpRequest, flow_group: str, flow_name: str, execution_id: int, job_name: str, index: int
) -> HttpResponse:
    """The first rows of one dataset an execution delivered (outputs.preview): for whoever may
    read the flow's data; 404 with the reason when it is no longer there."""
    execution = status.flow_execution(request.user, flow_group, flow_name, execution_id)
    context: dict[str, Any] = {"execution": execution, "job_name": job_name}
    try:
        context["preview"] = outputs.preview(execution, job_name, index, request.user)
    except outputs.PreviewGone as error:
        context["problem"] = str(error)
        return render(request, "orchestration/dataset_preview.html", context, status=404)
    return render(request, "orchestration/dataset_preview.html", context)
