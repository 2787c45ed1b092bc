"""Flow pages. Thin: they call flows.services and render; the list serves both
the whole page and, for htmx, just the table fragment.

Creating and editing a flow is one view (`flow_form`) and one template. The
form's live parts are htmx POSTs of the whole form to the same URL with
`?part=`: `field&field=<name>` (that input's errors), `schedule` (the
schedule in words and its next runs), `attributes` (the chosen template's
attribute inputs) and `compile` (the job DAG it would compile to). They save
nothing and answer 200 with the fragment, problems included.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.flows import capture, deletion, refresh, schedule_text, schedules, services
from portal.flows import policies as run_policies
from portal.flows.filters import FlowConfigFilterSet
from portal.flows.formpage import FlowFormPage
from portal.flows.forms import FlowConfigForm
from portal.flows.models import FlowConfig, FlowRefresh
from portal.flows.packflows import flows_using_pack
from portal.flows.rules import flow_for
from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.forms import TriggersForm, initial_of
from portal.keys.services import redact
from portal.quotas.services import QuotaExceeded
from portal.templatepacks.models import TemplatePack
from portal.templatepacks.services import template_paths


@login_required
@vary_on_headers("HX-Request")
def flow_list(request: AuthenticatedRequest) -> HttpResponse:
    filterset = FlowConfigFilterSet(
        request.GET,
        queryset=FlowConfig.objects.restrict(request.user)
        .select_related("owner")
        .annotate(refreshing=Exists(FlowRefresh.objects.filter(flow=OuterRef("pk")))),
    )
    page = Paginator(filterset.qs, 25).get_page(request.GET.get("page"))
    context = {"filter": filterset, "page": page}
    if request.htmx:
        return render(request, "flows/partials/flow_table.html", context)
    return render(request, "flows/flow_list.html", context)


@login_required
def flow_detail(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = flow_for(request.user, flow_group, flow_name)
    refreshing = refresh.is_refreshing(flow)
    if request.GET.get("part") == "compilation":  # polled while the verdict is refreshed
        return render(request, "flows/partials/compilation.html", {"flow": flow, "refreshing": refreshing})
    can_change = access.can(request.user, access.CHANGE, flow)
    context = {
        "flow": flow,
        "can_change": can_change,
        "refreshing": refreshing,
        "schedule_text": schedule_text.describe_schedule(flow.schedule),
        # A paused flow's ticks make no executions: it has no next runs until resumed.
        "next_runs": [] if flow.paused else schedules.next_run_times(flow.schedule, 5),
        "catch_up_policy": run_policies.catch_up(flow.properties),
        # As the keys app shows properties anywhere: ENC(...) and secret-named values masked.
        "properties": [
            (key, shown, shown != flow.properties[key]) for key, shown in redact(flow.properties).items()
        ],
    }
    return render(request, "flows/flow_detail.html", context)


class _TriggersRefused(Exception):
    """The flow's triggers were refused: the flow's save is rolled back with them."""


def _save(  # noqa: C901
    request: AuthenticatedRequest,
    form: FlowConfigForm,
    flow: FlowConfig | None,
    triggers: TriggersForm | None = None,
) -> HttpResponse | None:
    if not form.is_valid():
        FlowFormPage(form).check()  # the save's own problems too, so all are shown at once
        return None
    if triggers is not None and not triggers.is_valid():
        return None
    try:
        with transaction.atomic():  # the flow and its triggers together, or neither
            if flow is None:
                flow = services.create_flow(owner=request.user, data=form.flow_data())
            else:
                flow = services.update_flow(flow, data=form.flow_data(), by=request.user.get_username())
            if triggers is not None:
                try:
                    trigger_services.save_settings(flow, triggers.service_data())
                except ValidationError as error:
                    triggers.add_service_errors(error)
                    raise _TriggersRefused from None
    except _TriggersRefused:
        return None
    except ValidationError as error:
        form.add_model_errors(error)
        return None
    except services.FlowAlreadyExists as error:
        form.add_error("flow_name", str(error))
        return None
    except QuotaExceeded as refused:  # saving would run it now, past its owner's quota
        form.add_error(None, f"Not saved: {refused.message}")
        return None
    messages.success(request, f"Flow {flow} saved.")
    for warning in services.property_warnings(flow.properties):
        messages.warning(request, warning)
    return redirect("flows:detail", flow_group=flow.flow_group, flow_name=flow.flow_name)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def flow_form(
    request: AuthenticatedRequest, flow_group: str | None = None, flow_name: str | None = None
) -> HttpResponse:
    """New flow (no key in the URL) or edit one (owner or staff)."""
    flow = (
        flow_for(request.user, flow_group, flow_name, access.CHANGE)
        if flow_group is not None and flow_name is not None
        else None
    )
    # Template packs and the customer key are the owner's, whoever edits.
    owner = flow.owner if flow is not None else request.user
    if part := request.GET.get("part"):
        return _form_part(request, flow, owner, part)
    posted = request.method == "POST"
    form = FlowConfigForm(request.POST if posted else None, instance=flow, user=owner, encrypt=posted)
    # The triggers' fields are read when the form showed them (a client posting only the flow's
    # fields leaves the flow's triggers as they are).
    sent = posted and TriggersForm.SHOWN in request.POST
    triggers = TriggersForm(request.POST if sent else None, prefix="trigger", initial=_trigger_initial(flow))
    if posted and (response := _save(request, form, flow, triggers if sent else None)):
        return response
    context = {
        "form": form,
        "page": FlowFormPage(form),
        "flow": flow,
        "schedule": schedule_text.schedule_preview(_schedule_of(form)),
        "triggers_form": triggers,
    }
    return render(request, "flows/flow_form.html", context, status=400 if posted else 200)


def _trigger_initial(flow: FlowConfig | None) -> dict[str, Any]:
    return initial_of(trigger_services.settings_of(flow)) if flow is not None else {}


def _schedule_of(form: FlowConfigForm) -> str:
    return form.data.get("schedule", "") if form.is_bound else form.instance.schedule


def _form_part(request: HttpRequest, flow: FlowConfig | None, owner, part: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    form = FlowConfigForm(request.POST, instance=flow, user=owner)
    if part == "schedule":
        context: dict[str, Any] = {
            "schedule": schedule_text.schedule_preview(request.POST.get("schedule", ""))
        }
        return render(request, "flows/partials/schedule_part.html", context)
    if part not in ("field", "attributes", "compile"):
        return HttpResponseBadRequest("Unknown part; use field, schedule, attributes or compile.")
    page = FlowFormPage(form)
    # The save's own check: the preview says "compiled" only for a flow the save accepts.
    compiled = page.check()
    if part == "field":
        name = request.GET.get("field", "")
        if name not in form.fields and not name.startswith("attr:"):
            return HttpResponseBadRequest("Unknown field.")
        return render(request, "flows/partials/errors.html", {"errors": page.errors_for(name)})
    if part == "attributes":
        form.attribute_errors = {}  # just chosen: nothing typed yet, nothing to blame
        return render(request, "flows/partials/template_part.html", {"form": form, "page": page})
    errors = [f"{label}: {message}" if label else message for _id, label, message in page.error_summary()]
    context = {"compiled": compiled, "errors": errors}
    return render(request, "flows/partials/compile_preview.html", context)


@login_required
@require_http_methods(["POST"])
def flow_pause(request: HttpRequest, flow_group: str, flow_name: str, paused: bool) -> HttpResponse:
    """The flow page's Pause / Resume switch (owner, owning group, staff)."""
    flow = flow_for(request.user, flow_group, flow_name, access.CHANGE)
    services.set_paused(flow, paused, by=request.user.get_username())
    if paused:
        said = f"Flow {flow} paused: its schedule makes no executions until resumed."
        messages.success(request, f"{said} {capture.PAUSED}" if capture.captures_changes(flow) else said)
    else:
        policy = run_policies.catch_up(flow.properties)
        messages.success(
            request, f"Flow {flow} resumed: ticks missed while paused follow its catch-up policy ({policy})."
        )
    return redirect("flows:detail", flow_group=flow.flow_group, flow_name=flow.flow_name)


@login_required
@require_http_methods(["GET", "POST"])
def flow_delete(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = flow_for(request.user, flow_group, flow_name, access.DELETE)
    if request.method == "POST":
        services.delete_flow(flow)
        messages.success(request, f"Flow {flow} deleted.")
        return redirect("flows:list")
    return render(
        request,
        "flows/flow_confirm_delete.html",
        {
            "flow": flow,
            "capture": capture.DELETED if capture.captures_changes(flow) else "",
            "impact": deletion.impact(flow, request.user),
        },
    )


@login_required
def pack_flows(request: HttpRequest, name: str) -> HttpResponse:
    """The flows behind a pack page's "Used by N flows", a page at a time
    (served under /packs/<name>/flows/ by portal/urls.py)."""
    pack = access.get_allowed(TemplatePack.objects.all(), request.user, name=name)
    flows = flows_using_pack(pack.name, template_paths(pack)).order_by("flow_group", "flow_name")
    page = Paginator(flows, 25).get_page(request.GET.get("page"))
    return render(request, "flows/pack_flows.html", {"pack": pack, "page": page})
