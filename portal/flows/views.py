"""Flow pages. Thin: they call flows.services and render; the list serves both
the whole page and, for htmx, just the table fragment."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from portal.flows import services
from portal.flows.filters import FlowConfigFilterSet
from portal.flows.forms import FlowConfigForm
from portal.flows.models import FlowConfig


def _flow_for(request: HttpRequest, flow_group: str, flow_name: str, action: str = "view") -> FlowConfig:
    flow = get_object_or_404(
        FlowConfig.objects.visible_to(request.user).select_related("owner"),
        flow_group=flow_group,
        flow_name=flow_name,
    )
    if action != "view" and not FlowConfig.objects.restrict(request.user, action).filter(pk=flow.pk).exists():
        raise PermissionDenied("Only the flow's owner or staff can change it.")
    return flow


@login_required
@vary_on_headers("HX-Request")
def flow_list(request: HttpRequest) -> HttpResponse:
    filterset = FlowConfigFilterSet(
        request.GET, queryset=FlowConfig.objects.visible_to(request.user).select_related("owner")
    )
    page = Paginator(filterset.qs, 25).get_page(request.GET.get("page"))
    context = {"filter": filterset, "page": page}
    if request.htmx:
        return render(request, "flows/partials/flow_table.html", context)
    return render(request, "flows/flow_list.html", context)


@login_required
def flow_detail(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = _flow_for(request, flow_group, flow_name)
    can_change = FlowConfig.objects.restrict(request.user, "change").filter(pk=flow.pk).exists()
    return render(request, "flows/flow_detail.html", {"flow": flow, "can_change": can_change})


def _save(request: HttpRequest, form: FlowConfigForm, flow: FlowConfig | None) -> HttpResponse | None:
    if not form.is_valid():
        return None
    try:
        if flow is None:
            flow = services.create_flow(owner=request.user, data=form.flow_data())
        else:
            flow = services.update_flow(flow, data=form.flow_data())
    except ValidationError as error:
        form.add_model_errors(error)
        return None
    except services.FlowAlreadyExists as error:
        form.add_error("flow_name", str(error))
        return None
    messages.success(request, f"Flow {flow} saved.")
    return redirect("flows:detail", flow_group=flow.flow_group, flow_name=flow.flow_name)


@login_required
@require_http_methods(["GET", "POST"])
def flow_create(request: HttpRequest) -> HttpResponse:
    form = FlowConfigForm(request.POST or None)
    if request.method == "POST" and (response := _save(request, form, None)):
        return response
    status = 400 if request.method == "POST" else 200
    return render(request, "flows/flow_form.html", {"form": form, "flow": None}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def flow_edit(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = _flow_for(request, flow_group, flow_name, "change")
    form = FlowConfigForm(request.POST or None, instance=flow)
    if request.method == "POST" and (response := _save(request, form, flow)):
        return response
    status = 400 if request.method == "POST" else 200
    return render(request, "flows/flow_form.html", {"form": form, "flow": flow}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def flow_delete(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = _flow_for(request, flow_group, flow_name, "delete")
    if request.method == "POST":
        services.delete_flow(flow)
        messages.success(request, f"Flow {flow} deleted.")
        return redirect("flows:list")
    return render(request, "flows/flow_confirm_delete.html", {"flow": flow})
