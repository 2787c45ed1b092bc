"""`GET /api/`: where the API starts. The menu's API link opens the docs; a client (or a person
trimming an address) that asks the root gets a small index instead of a 404: the docs, the
schema, and the address of each resource that takes no key, read from the URL map so it
never falls behind."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

_STATIC = re.compile(r"^[A-Za-z][A-Za-z0-9_/-]*\Z")


def resource_paths(patterns: list[Any]) -> list[str]:
    """The addresses under /api/ that take no key (collections and actions such as
    `flowconfigs`, `templates/resolve`), in the URL map's order; schema and docs apart."""
    paths: list[str] = []
    for pattern in patterns:
        route = str(pattern.pattern).rstrip("/")
        if _STATIC.match(route) and route not in {"schema", "docs"} and route not in paths:
            paths.append(route)
    return paths


class ApiRoot(APIView):
    """Signed-in callers only, as every resource it names."""

    patterns: list[Any] = []

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        base = request.build_absolute_uri("/api/")
        return Response(
            {
                "docs": reverse("swagger-ui", request=request),
                "schema": reverse("schema", request=request),
                "resources": {route: f"{base}{route}" for route in resource_paths(self.patterns)},
            }
        )
