"""One FilterSet drives the executions page and `GET /api/flowexecutions` alike."""

from __future__ import annotations

from datetime import datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.orchestration.models import ExecutionStatus, FlowExecution
from portal.orchestration.status import MAX_EXECUTION_ID


class MomentField(forms.CharField):
    """A point in time as epoch milliseconds (the API's time unit) or ISO
    8601 (`2026-03-01T12:00`, `…Z`, `…+02:00`; no offset = the portal's time
    zone); cleaned to epoch milliseconds."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        if value.isascii() and value.isdigit():
            millis = int(value) if len(value) <= 19 else -1
        else:
            try:
                moment = parse_datetime(value)
            except ValueError:
                moment = None
            if moment is None:
                raise ValidationError(
                    "Give epoch milliseconds or an ISO 8601 date-time, e.g. 2026-03-01T12:00:00Z.",
                    code="invalid",
                )
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment)
            millis = _millis(moment)
        if not 0 <= millis <= MAX_EXECUTION_ID:
            raise ValidationError("Out of range: give a time between 1970 and year 9999.", code="invalid")
        return millis


def _millis(moment: datetime) -> int:
    try:
        return int(moment.timestamp() * 1000)
    except (OverflowError, ValueError):
        return -1


class MomentFilter(django_filters.Filter):
    field_class = MomentField


class FlowExecutionFilterSet(django_filters.FilterSet):
    flowGroup = django_filters.CharFilter(field_name="flow_group", label="Flow group")
    flowName = django_filters.CharFilter(field_name="flow_name", label="Flow name")
    status = django_filters.MultipleChoiceFilter(
        field_name="status",
        choices=ExecutionStatus.choices,
        label="Status",
        help_text="Repeat to match any of several statuses.",
    )
    trigger = django_filters.ChoiceFilter(
        field_name="trigger", choices=FlowExecution.Trigger.choices, label="Trigger"
    )
    # flowExecutionId is the epoch milliseconds at which the execution was created.
    since = MomentFilter(
        field_name="execution_id",
        lookup_expr="gte",
        label="Since",
        help_text="Executions created at or after this time (epoch ms or ISO 8601).",
    )
    until = MomentFilter(
        field_name="execution_id",
        lookup_expr="lte",
        label="Until",
        help_text="Executions created at or before this time (epoch ms or ISO 8601).",
    )

    class Meta:
        model = FlowExecution
        fields: list[str] = []
