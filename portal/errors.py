"""The portal's 403, 404, 405, 413 and 500 answers: JSON under /api/ (what an API client can
parse), a page with the site's navigation everywhere else."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from portal.restli.errors import error_response as restli_error_response
from portal.restli.errors import is_restli_path


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _is_restli(request: HttpRequest) -> bool:
    """Gobblin's clients read Rest.li errors (portal.restli), not pages."""
    return is_restli_path(request.path)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_restli(request):
        return restli_error_response(404, f"No Rest.li resource at {request.path[:200]}.")
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return render(request, "404.html", {"path": request.path}, status=404)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Says why: the services' PermissionDenied messages name what only whom may do."""
    reason = str(exception or "") or "Your account may not do this."
    if _is_api(request):
        return JsonResponse({"detail": reason}, status=403)
    return render(request, "403.html", {"reason": reason, "path": request.path}, status=403)


def method_not_allowed(request: HttpRequest, allowed: list[str]) -> HttpResponse:
    """Django's require_POST answers an empty 405; a person who reloads the address a form
    was sent to gets a page saying so, with the way back (the address one level up)."""
    detail = f'Method "{request.method}" not allowed.'
    if _is_restli(request):
        response = restli_error_response(405, detail)
    elif _is_api(request):
        response = JsonResponse({"detail": detail}, status=405)
    else:
        up = request.path.rstrip("/").rsplit("/", 1)[0] + "/"
        context = {"path": request.path, "allowed": allowed, "up": up}
        response = render(request, "405.html", context, status=405)
    response["Allow"] = ", ".join(allowed)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """Rendered without the request context: whatever failed (the database,
    a context processor) must not fail the error page too."""
    if _is_restli(request):
        return restli_error_response(500, "Server error; the portal log has the details.")
    if _is_api(request):
        return JsonResponse({"detail": "Server error; the portal log has the details."}, status=500)
    return HttpResponse(render_to_string("500.html"), status=500)


def request_too_large(request: HttpRequest, length: int, limit: int) -> HttpResponse:
    """Answered by the size-limit middleware, before sessions exist: no request context."""
    detail = f"Request body of {length} bytes is over the {limit}-byte limit."
    if _is_restli(request):
        return restli_error_response(413, detail)
    if _is_api(request):
        return JsonResponse({"detail": detail}, status=413)
    context = {
        "detail": detail,
        "upload_limit": settings.MAX_UPLOAD_BYTES,
        "request_limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
    }
    return HttpResponse(render_to_string("413.html", context), status=413)
