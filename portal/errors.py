"""The portal's 404 and 500 answers: JSON under /api/ (what an API client can
parse), a page with the site's navigation everywhere else."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return render(request, "404.html", {"path": request.path}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """Rendered without the request context: whatever failed (the database,
    a context processor) must not fail the error page too."""
    if _is_api(request):
        return JsonResponse({"detail": "Server error; the portal log has the details."}, status=500)
    return HttpResponse(render_to_string("500.html"), status=500)
