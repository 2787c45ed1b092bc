"""The flow page's replication slot card: a fragment of its own, so the flow page never waits on
the source server, read through :mod:`portal.monitoring.slots` (cached briefly); and its "Take a
new snapshot" button (:func:`portal.orchestration.control.cdc.resnapshot`)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.flows.models import FlowConfig
from portal.flows.rules import flow_for
from portal.monitoring import slots
from portal.orchestration.control import cdc
from portal.orchestration.state.statestore import PendingCommitSteps


def _flow(request: AuthenticatedRequest, flow_group: str, flow_name: str, action: str) -> FlowConfig:
    queryset = FlowConfig.objects.select_related("owner", "compiled_dag")
    return flow_for(request.user, flow_group, flow_name, action, queryset=queryset)


@login_required
@require_GET
@never_cache
def flow_slot(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = _flow(request, flow_group, flow_name, access.VIEW)
    context = {
        "flow": flow,
        "report": slots.read(flow),
        "can_change": access.can(request.user, access.CHANGE, flow),
        "resnapshot_url": reverse("monitoring:flow_resnapshot", args=[flow.flow_group, flow.flow_name]),
    }
    return render(request, "monitoring/partials/flow_slot.html", context)


@login_required
@require_POST
def flow_resnapshot(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = _flow(request, flow_group, flow_name, access.CHANGE)
    try:
        cleared = cdc.resnapshot(flow, user=request.user)
    except (cdc.NotCapturing, PendingCommitSteps) as error:
        messages.error(request, str(error))
    else:
        slots.forget(flow)
        what = ", ".join(cleared) if cleared else "no table had a position"
        messages.success(
            request,
            f"A new snapshot was asked for ({what}): the next run reads the tables whole again. "
            "Run now to take it now.",
        )
    return redirect(reverse("flows:detail", args=[flow.flow_group, flow.flow_name]) + "#slot")
