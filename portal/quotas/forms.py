"""The quota form staff fill in: the scope picks which one target field applies."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from portal.quotas.models import Quota

TARGET = {Quota.Scope.USER: "user", Quota.Scope.GROUP: "group", Quota.Scope.EXECUTOR: "executor"}
LIMITS = (
    "max_concurrent_jobs",
    "max_executions_per_hour",
    "max_cores_per_job",
    "max_memory_mb_per_job",
    "max_priority",
    "weight",
)


def clean_target(data: Any) -> Any:
    """Keep only the target the scope names, and say which field is missing."""
    scope = str(data.get("scope") or "")
    wanted = TARGET.get(scope)  # type: ignore[call-overload]  # a Scope value as text
    for field in TARGET.values():
        if field != wanted:
            data[field] = None
    if wanted and not data.get(wanted):
        raise ValidationError({wanted: f"Choose the {wanted} this {scope.lower()} quota is for."})
    if wanted in ("group", "executor") and data.get("weight") not in (None, "", 1):
        # The fair order weighs owners; a weight here would be stored and never read.
        raise ValidationError({"weight": "Weights are per user: set it on a user's quota or the default."})
    return data


class QuotaForm(forms.ModelForm):
    class Meta:
        model = Quota
        fields = ("scope", "user", "group", "executor", *LIMITS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["weight"].required = False  # empty: 1, as for a quota made through the API

    def clean_weight(self) -> int:
        return self.cleaned_data.get("weight") or 1

    def clean(self) -> Any:
        return clean_target(super().clean() or {})
