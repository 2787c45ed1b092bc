"""The page of a flow's data triggers, freshness goal and webhook token. Thin: flows.triggers.services
checks and saves; the webhook token is shown once, on the page that created it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.flows.rules import flow_for
from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.forms import TriggersForm, initial_of


@login_required
@require_http_methods(["GET", "POST"])
def flow_triggers(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = flow_for(request.user, flow_group, flow_name, access.CHANGE)
    current = trigger_services.settings_of(flow)
    if request.method == "POST":
        form = TriggersForm(request.POST)
        if form.is_valid():
            try:
                trigger_services.save_settings(flow, form.service_data())
            except ValidationError as error:
                form.add_service_errors(error)
            else:
                messages.success(request, "Triggers and freshness goal saved.")
                return redirect("flows:detail", flow.flow_group, flow.flow_name)
        status = 400
    else:
        form = TriggersForm(initial=initial_of(current))
        status = 200
    hook_path = f"/api/hooks/flows/{flow.flow_group}/{flow.flow_name}"
    context = {
        "flow": flow,
        "form": form,
        "current": current,
        "hook_url": request.build_absolute_uri(hook_path),
    }
    return render(request, "flows/flow_triggers.html", context, status=status)


@login_required
@require_POST
def flow_webhook_token(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    """Create (or replace) the webhook token and show it this once; `revoke` removes it."""
    flow = flow_for(request.user, flow_group, flow_name, access.CHANGE)
    if request.POST.get("revoke"):
        trigger_services.revoke_webhook_token(flow)
        messages.success(request, "Webhook token revoked: calls bearing it are refused.")
        return redirect("flows:triggers", flow.flow_group, flow.flow_name)
    token = trigger_services.create_webhook_token(flow)
    hook_path = f"/api/hooks/flows/{flow.flow_group}/{flow.flow_name}"
    context = {
        "flow": flow,
        "form": None,
        "current": trigger_services.settings_of(flow),
        "new_token": token,
        "hook_url": request.build_absolute_uri(hook_path),
    }
    response = render(request, "flows/flow_triggers.html", context)
    response["Cache-Control"] = "no-store"
    return response
