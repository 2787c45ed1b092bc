"""Execution history is the biggest table a page lists (millions of rows):
its pages count at most COUNT_CAP rows instead of all of them. Pages go
newest first over an index, so the OFFSET of any page within the cap stays
cheap; to go further back, filter by time (`until`)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response

COUNT_CAP = 1_000


class CappedPaginator(Paginator):
    object_list: QuerySet[Any]  # the API paginates querysets only

    @cached_property
    def capped(self) -> bool:
        return self._bounded_count > COUNT_CAP

    @cached_property
    def _bounded_count(self) -> int:
        # COUNT over a LIMIT subquery: reads at most COUNT_CAP + 1 index entries.
        return self.object_list[: COUNT_CAP + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self._bounded_count, COUNT_CAP)


class CappedPageNumberPagination(PageNumberPagination):
    """The project's page-number pagination, with `count` capped at COUNT_CAP
    and `countCapped` saying when there are more."""

    django_paginator_class = CappedPaginator

    def get_paginated_response(self, data) -> Response:
        response = super().get_paginated_response(data)
        paginator = self.page.paginator if self.page is not None else None
        response.data["countCapped"] = isinstance(paginator, CappedPaginator) and paginator.capped
        return response

    def get_paginated_response_schema(self, schema: dict) -> dict:
        result = super().get_paginated_response_schema(schema)
        result["properties"]["countCapped"] = {
            "type": "boolean",
            "description": f"true when more than {COUNT_CAP} executions match (count stops there)",
        }
        return result
