"""The page form for wrapping a customer key (the same service as the API)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


class WrapKeyForm(forms.Form):
    generate = forms.BooleanField(
        required=False, initial=True, label="Generate a new key for me (shown once)"
    )
    key = forms.CharField(
        required=False,
        max_length=128,
        label="Or wrap a key I hold",
        # Never rendered back into the page, not even after an error.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Base64 of 32 bytes (AES-256), e.g. from `python -m portal.crypto.client generate-key`.",
    )
    label = forms.CharField(required=False, max_length=128, help_text="e.g. prod-db")
    group = forms.ChoiceField(required=False, label="Owner", help_text="Group keys serve every member.")

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        groups = list(user.groups.order_by("name").values_list("name", flat=True)) if user else []
        group = self.fields["group"]
        assert isinstance(group, forms.ChoiceField)  # declared above
        group.choices = [("", "Just me"), *((name, f"group {name}") for name in groups)]

    def clean(self) -> dict:
        super().clean()  # fills self.cleaned_data (and returns it)
        data = self.cleaned_data
        if data.get("key"):
            data["generate"] = False  # a key typed in wins over the pre-ticked box
        return data

    def wrap_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "key": data.get("key") or None,
            "generate": bool(data.get("generate")),
            "label": data.get("label", ""),
            "group": data.get("group") or None,
        }

    def add_service_errors(self, error: ValidationError) -> None:
        for field, messages in error.message_dict.items():
            self.add_error(field if field in self.fields else None, messages)
