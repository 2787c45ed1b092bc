"""Admin pages of the state store: every dataset's watermark, its history
(one row per committed run, skip and reset), its unfinished commit steps,
and an audited reset. Staff only: a watermark decides what the next run
pulls, so moving one by hand can skip or repeat data."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from portal.accounts import access
from portal.monitoring import history as monitoring_history
from portal.orchestration.models import CommitStoreDataset, DatasetState
from portal.orchestration.state import lineage, statestore
from portal.pipeline.watermarks import value_of

HISTORY_PAGE = 50


# Anonymous users go to the login page; signed-in non-staff get 403.
staff_required = access.staff_required("Only staff can see and reset watermarks.")


class ResetForm(forms.Form):
    watermark = forms.CharField(
        required=False,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The value the next run continues after. Empty: the next run pulls the dataset from the start.",
    )
    reason = forms.CharField(
        strip=True,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Kept in the dataset's history with your name.",
        error_messages={"required": "Give a reason: it is kept in the dataset's history."},
    )
    discard_pending = forms.BooleanField(
        required=False,
        label="Also discard the unfinished commit steps",
        help_text="Only when the dataset has some. Files or rows they already published stay published.",
    )


def _display(watermark: str) -> str:
    try:
        return str(value_of(watermark)) if watermark else ""
    except Exception:  # a watermark the display helper does not know: show it as stored
        return watermark


@staff_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    states = DatasetState.objects.all()
    if query:
        states = states.filter(
            Q(flow_group__icontains=query)
            | Q(flow_name__icontains=query)
            | Q(job_name__icontains=query)
            | Q(dataset_urn__icontains=query)
        )
    page = Paginator(states, 100).get_page(request.GET.get("page"))
    pending = {
        (row.store.name, row.dataset_urn)
        for row in CommitStoreDataset.objects.select_related("store").only("store__name", "dataset_urn")
    }
    rows = [
        {
            "state": state,
            "shown": _display(state.watermark),
            "pending": (statestore.store_name_of(state), state.dataset_urn) in pending,
        }
        for state in page
    ]
    return render(request, "orchestration/state/list.html", {"rows": rows, "page": page, "query": query})


@staff_required
@require_http_methods(["GET", "POST"])
def dataset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    state = get_object_or_404(DatasetState, pk=pk)
    form = ResetForm(request.POST or None, initial={"watermark": state.watermark})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                statestore.reset_watermark(
                    state,
                    watermark=form.cleaned_data["watermark"],
                    reason=form.cleaned_data["reason"],
                    changed_by=request.user.get_username(),
                    discard_pending=form.cleaned_data["discard_pending"],
                )
            except statestore.PendingCommitSteps as exc:
                form.add_error("discard_pending", str(exc))
            else:
                messages.success(request, f"Watermark of {state.dataset_urn} reset.")
                return redirect("state:dataset", pk=state.pk)
        status = 400
    pending = statestore.pending_steps(state)
    history = Paginator(state.history.all(), HISTORY_PAGE).get_page(request.GET.get("page"))
    # The monitoring dataset page's charts, drawn by the same code (history.py, charts.py).
    charts = monitoring_history.dataset_context(state)
    context = {
        "state": state,
        "shown": _display(state.watermark),
        "history": history,
        "schemas": statestore.schema_history(state),
        "pending": pending,
        "pending_count": pending.steps.count() if pending else 0,
        "form": form,
        "watermark_svg": charts["watermark_svg"],
        "records_svg": charts["records_svg"],
        "watermark_kind": charts["watermark_kind"],
        "unplotted": charts["unplotted"],
        "execution_url": charts["execution_url"],
        **lineage.neighbours(state),  # staff: every flow's edges
    }
    return render(request, "orchestration/state/detail.html", context, status=status)
