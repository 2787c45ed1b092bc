"""Forms of the execution pages."""

from __future__ import annotations

from django import forms


class BackfillForm(forms.Form):
    """One dataset's watermark range for a backfill from the flow's pages
    (the API's `backfill` takes several at once)."""

    dataset = forms.CharField(
        label="Dataset URN",
        max_length=500,
        help_text="The dataset.urn to read again; the datasets this flow has watermarks for are suggested.",
        widget=forms.TextInput(attrs={"list": "backfill-datasets", "autocomplete": "off"}),
    )
    low = forms.CharField(
        label="Low watermark",
        max_length=1000,
        required=False,
        help_text="Records above this, in the watermark's own terms: a date or time (2024-03-01, "
        "2024-03-01T10:00:00Z) for a time column or a files source (file times), a number for a numeric "
        "column. Empty reads from the first record.",
    )
    high = forms.CharField(
        label="High watermark",
        max_length=1000,
        help_text="Up to and including this, in the same terms. A range that matches nothing loaded "
        "so far is refused. The stored watermark does not move.",
    )

    def backfill(self) -> dict[str, dict[str, str | None]]:
        data = self.cleaned_data
        return {data["dataset"].strip(): {"low": data["low"].strip() or None, "high": data["high"].strip()}}
