"""Refuse oversized request bodies up front with 413, for pages and API."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RequestSizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit and length > limit and not request.path.startswith(settings.LARGE_UPLOAD_PATHS):
            return JsonResponse(
                {"detail": f"Request body of {length} bytes is over the {limit}-byte limit."}, status=413
            )
        return self.get_response(request)
