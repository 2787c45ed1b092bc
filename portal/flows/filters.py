"""One FilterSet drives the flow list page and `GET /api/flowconfigs` alike."""

from __future__ import annotations

import django_filters
from django.db.models import Q

from portal.flows.models import FlowConfig


class FlowConfigFilterSet(django_filters.FilterSet):
    flowGroup = django_filters.CharFilter(field_name="flow_group", label="Flow group")
    owner = django_filters.CharFilter(field_name="owner__username", label="Owner")
    compilationStatus = django_filters.ChoiceFilter(
        field_name="compilation_status", choices=FlowConfig.Compilation.choices, label="Compilation"
    )
    # A choice, not django-filter's BooleanFilter, whose widget reads "maybe" as no filter at all:
    # a value that is neither true nor false is a 400 naming it, as for the other filters.
    paused = django_filters.ChoiceFilter(
        choices=[("true", "paused"), ("false", "running")],
        method="by_paused",
        label="Paused",
        empty_label="any",
    )
    lastRun = django_filters.ChoiceFilter(
        choices=FlowConfig.LastRun.choices, method="last_run", label="Last run", empty_label="any"
    )
    q = django_filters.CharFilter(method="search", label="Search")

    class Meta:
        model = FlowConfig
        fields: list[str] = []

    def by_paused(self, queryset, name, value):
        return queryset.filter(paused=value == "true")

    def last_run(self, queryset, name, value):
        """By the flow's own last-run column (indexed), never by reading executions."""
        if value == FlowConfig.LastRun.NEVER:
            return queryset.filter(last_run_status="")
        if value == FlowConfig.LastRun.RUNNING:
            return queryset.filter(last_run_status__in=FlowConfig.UNFINISHED_RUN_STATUSES)
        return queryset.filter(last_run_status=value)

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(flow_group__icontains=value)
            | Q(flow_name__icontains=value)
            | Q(description__icontains=value)
            | Q(source__icontains=value)
        )
