"""The signed-in user's notifications page: their alerts, newest first."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.events import notifications
from portal.events.links import execution_path


@login_required
@require_http_methods(["GET", "HEAD"])
def notification_list(request: HttpRequest) -> HttpResponse:
    page = notifications.page_of(request.user, request.GET.get("page"))
    rows = [
        {
            "note": note,
            "url": execution_path(note.flow_group, note.flow_name, note.execution_id)
            if note.flow_group and note.flow_name and note.execution_id is not None
            else "",
        }
        for note in page
    ]
    return render(request, "events/notifications.html", {"page": page, "rows": rows})


@login_required
@require_POST
def mark_all_read(request: HttpRequest) -> HttpResponse:
    marked = notifications.mark_all_read(request.user)
    messages.success(request, f"Marked {marked} notification{'s' if marked != 1 else ''} as read.")
    return redirect("events:notifications")
