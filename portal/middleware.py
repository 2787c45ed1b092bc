"""Refuse oversized request bodies up front with 413, for pages and API; answer an empty
405 (Django's require_POST and friends) in the form the caller reads."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from portal.errors import method_not_allowed, request_too_large


def body_limit(request: HttpRequest) -> int:
    """The largest body this request may carry: pack archive uploads get ``MAX_UPLOAD_BYTES``,
    everything else ``MAX_REQUEST_BYTES`` (so a form under ``/packs/`` is not an upload)."""
    upload = request.content_type == "multipart/form-data" and request.path.startswith(
        settings.LARGE_UPLOAD_PATHS
    )
    return settings.MAX_UPLOAD_BYTES if upload else settings.DATA_UPLOAD_MAX_MEMORY_SIZE


class RequestSizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = body_limit(request)
        if limit and length > limit:
            return request_too_large(request, length, limit)
        return self.get_response(request)


class MethodNotAllowedMiddleware:
    """An empty 405 becomes the site's page (or JSON under /api/); a 405 that already says
    something (DRF's JSON, Rest.li's error) is left as it is."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or getattr(response, "streaming", False) or response.content:
            return response
        allowed = [method.strip() for method in response.get("Allow", "").split(",") if method.strip()]
        return method_not_allowed(request, allowed)
