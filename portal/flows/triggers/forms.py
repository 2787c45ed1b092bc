"""The page's form of a flow's data triggers and freshness goal: it only shows; the checks are
flows.triggers.services' (the API's too), their errors put beside the field they name."""

from __future__ import annotations

from typing import Any

from django import forms

from portal.flows.triggers.goals import FRESHNESS_HELP
from portal.flows.triggers.models import MAX_DEBOUNCE_SECONDS, FlowTrigger
from portal.flows.triggers.services import TriggerSettings
from portal.form_errors import ServiceErrorsMixin


class TriggersForm(ServiceErrorsMixin, forms.Form):
    # Posted by the flow form beside these fields: they were shown, so they are meant.
    SHOWN = "trigger-shown"

    upstream = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Upstream datasets",
        help_text="One a line: <flowGroup>/<flowName> (any of that flow's destination datasets) or "
        "<flowGroup>/<flowName>/<dataset>. Only datasets the flow's owner may read.",
    )
    upstream_mode = forms.ChoiceField(
        choices=FlowTrigger.Mode.choices, initial=FlowTrigger.Mode.ANY, label="Run when"
    )
    debounce_seconds = forms.IntegerField(
        min_value=0,
        max_value=MAX_DEBOUNCE_SECONDS,
        initial=0,
        label="Debounce (seconds)",
        help_text="Start this long after the last upstream commit, so a burst of commits starts one run.",
    )
    skip_empty = forms.BooleanField(
        required=False,
        label="Not when the upstream commit delivered no record",
        help_text="Unticked, every upstream commit counts, an empty one too.",
    )
    on_files = forms.BooleanField(
        required=False, label="Run when new files arrive in the source folder (files source)"
    )
    freshness = forms.CharField(
        required=False,
        max_length=40,
        label="Freshness goal",
        help_text=f"Of the destination datasets: {FRESHNESS_HELP}.",
    )

    dataset_freshness = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Freshness per dataset",
        help_text="One a line: <dataset.urn>: <goal>, e.g. public.orders: by 06:00.",
    )

    def service_data(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["upstream"] = [
            line.strip() for line in (data.get("upstream") or "").splitlines() if line.strip()
        ]
        return data


def initial_of(current: TriggerSettings) -> dict[str, Any]:
    """The form's fields as a flow's stored triggers fill them (the flow form and the triggers page)."""
    return {
        "upstream": "\n".join(current.upstream),
        "upstream_mode": current.upstream_mode,
        "debounce_seconds": current.debounce_seconds,
        "skip_empty": current.skip_empty,
        "on_files": current.on_files,
        "freshness": current.freshness,
        "dataset_freshness": "\n".join(f"{k}: {v}" for k, v in current.dataset_freshness.items()),
    }
