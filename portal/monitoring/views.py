"""Monitoring pages: the live dashboard, a flow's run chart (a fragment the
flow page includes), a dataset's watermark history, and /metrics. Every
signed-in user may look, like the flow catalog (FlowConfig.visible_to)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from portal.accounts.requests import AuthenticatedRequest, HtmxRequest
from portal.monitoring import history, metrics, subscriptions
from portal.monitoring.dashboard import dashboard_context
from portal.monitoring.first_steps import first_steps, newcomer, progress
from portal.monitoring.forms import SubscriptionForm
from portal.monitoring.models import Subscription
from portal.orchestration.state import lineage, statestore
from portal.topology import sharing

HTMX_STOP_POLLING = 286


def _signed_in_or_redirect(request: HtmxRequest) -> HttpResponse | None:
    """A fragment polled after the session expired sends the whole page to
    the login form instead of swapping the form into the fragment."""
    if request.user.is_authenticated:
        return None
    if request.htmx:
        next_url = request.htmx.current_url_abs_path or "/"
        return HttpResponseClientRedirect(
            f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': next_url})}"
        )
    return redirect_to_login(request.get_full_path())


@require_GET
@never_cache
@vary_on_headers("HX-Request")
def dashboard(request: HtmxRequest) -> HttpResponse:
    if (denied := _signed_in_or_redirect(request)) is not None:
        return denied
    context = dashboard_context()
    if request.htmx:
        return render(request, "monitoring/partials/dashboard_live.html", context)
    waiting, waiting_total = sharing.awaiting_answer(request.user)
    return render(
        request,
        "monitoring/dashboard.html",
        {
            **context,
            "first_steps": first_steps(request.user),
            "access_requests": waiting,
            "access_requests_total": waiting_total,
        },
    )


@login_required
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """Where signing in lands: a newcomer (no flow, no data node of their own) on the start
    page, which says what to do first; everyone else on the dashboard."""
    return redirect("monitoring:start" if newcomer(request.user) else "monitoring:dashboard")


@login_required
@require_safe
def start(request: HttpRequest) -> HttpResponse:
    """The newcomer's three steps, the next one marked; open to everyone (the dashboard links it)."""
    return render(request, "monitoring/start.html", {"progress": progress(request.user)})


def flow_chart_context(request: HttpRequest, flow_group: str, flow_name: str) -> dict:
    """The chart of a flow the user may see; 404 otherwise (a flow deleted
    since keeps its chart while its executions are kept)."""
    if not history.flow_history_visible(request.user, flow_group, flow_name) or not history.flow_has_history(
        flow_group, flow_name
    ):
        raise Http404("No such flow.")
    return history.flow_chart_context(flow_group, flow_name)


@require_GET
@never_cache
@vary_on_headers("HX-Request")
def flow_chart(request: HtmxRequest, flow_group: str, flow_name: str) -> HttpResponse:
    """The fragment; polled by htmx while the flow has an unfinished
    execution, answered 286 (stop polling) with the final chart after."""
    if (denied := _signed_in_or_redirect(request)) is not None:
        return denied
    context = flow_chart_context(request, flow_group, flow_name)
    status = HTMX_STOP_POLLING if request.htmx and not context["running"] else 200
    return render(request, "monitoring/partials/flow_chart.html", context, status=status)


@login_required
@require_GET
def dataset(
    request: HttpRequest, flow_group: str, flow_name: str, job_name: str, dataset_urn: str
) -> HttpResponse:
    if not history.flow_history_visible(request.user, flow_group, flow_name):
        raise Http404("No such dataset.")
    # The current flow's own state (a deleted flow's, once none has the name).
    state = (
        statestore.states_of(flow_group, flow_name)
        .filter(job_name=job_name, dataset_urn=dataset_urn)
        .order_by("-updated")
        .first()
    )
    if state is None:
        raise Http404("No such dataset.")
    context = history.dataset_context(state)
    # What feeds it and what it feeds: only the edges of flows whose history the viewer may see.
    context.update(
        lineage.neighbours(state, lambda group, name: history.flow_history_visible(request.user, group, name))
    )
    return render(request, "monitoring/dataset.html", context)


@require_GET
@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for whoever metrics.may_scrape lets in; anyone else gets 401
    asking for the bearer token (`Authorization: Bearer <MONITORING_METRICS_TOKEN>`)."""
    if not metrics.may_scrape(request):
        response = HttpResponse(
            "Sign in, or send the metrics bearer token.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.render(), content_type=metrics.CONTENT_TYPE)


# --- subscriptions ----------------------------------------------------------------


def _readable_flow_or_404(request: HttpRequest, flow_group: str, flow_name: str):
    flow = subscriptions.readable_flow(request.user, flow_group, flow_name)
    if flow is None:
        raise Http404("No such flow.")
    return flow


@login_required
@require_http_methods(["GET", "POST"])
def flow_subscription(request: AuthenticatedRequest, flow_group: str, flow_name: str) -> HttpResponse:
    """Subscribe to a flow, or change what and how you hear about it."""
    flow = _readable_flow_or_404(request, flow_group, flow_name)
    existing = subscriptions.subscription_of(request.user, flow)
    instance = existing or Subscription(user=request.user, flow=flow)
    form = SubscriptionForm(request.POST or None, instance=instance)
    if request.method == "POST":
        if form.is_valid():
            subscriptions.save(form.instance)
            messages.success(request, f"Subscribed to {flow}: {subscriptions.describe(form.instance)}.")
            return redirect("flows:detail", flow.flow_group, flow.flow_name)
        status = 400
    else:
        status = 200
    context = {"flow": flow, "form": form, "subscription": existing}
    return render(request, "monitoring/subscription_form.html", context, status=status)


@login_required
@require_POST
def subscription_delete(request: HttpRequest, subscription_id: int) -> HttpResponse:
    """Remove one of your subscriptions (someone else's is a 404)."""
    subscription = get_object_or_404(
        Subscription.objects.select_related("flow"), pk=subscription_id, user=request.user
    )
    flow = subscription.flow
    subscription.delete()
    messages.success(request, f"Unsubscribed from {flow}.")
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = resolve_url("accounts:profile")
    return redirect(next_url)
