"""The quotas pages: use against quota per user, group and executor with the
jobs waiting and why (everyone signed in may look: it explains their waits),
and the staff's form to set quotas."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts import access
from portal.orchestration.control import quota_gate
from portal.quotas.forms import QuotaForm
from portal.quotas.models import Quota

staff_required = access.staff_required("Only staff can set quotas.")


@login_required
@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    context = {"rows": quota_gate.usage(), "waiting": quota_gate.waiting_jobs()}
    return render(request, "quotas/usage.html", context)


def _form_page(request: HttpRequest, quota: Quota | None) -> HttpResponse:
    form = QuotaForm(request.POST or None, instance=quota)
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        saved.updated_by = request.user.get_username()
        saved.save()
        messages.success(request, f"Quota for {saved.subject} saved.")
        return redirect("quotas:usage")
    return render(request, "quotas/quota_form.html", {"form": form, "object": quota})


@staff_required
@require_http_methods(["GET", "POST"])
def quota_create(request: HttpRequest) -> HttpResponse:
    return _form_page(request, None)


@staff_required
@require_http_methods(["GET", "POST"])
def quota_edit(request: HttpRequest, pk: int) -> HttpResponse:
    return _form_page(request, get_object_or_404(Quota, pk=pk))


@staff_required
@require_POST
def quota_delete(request: HttpRequest, pk: int) -> HttpResponse:
    quota = get_object_or_404(Quota, pk=pk)
    subject = quota.subject
    quota.delete()
    messages.success(request, f"Quota for {subject} removed.")
    return redirect("quotas:usage")
