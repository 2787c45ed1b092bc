"""Errors a service raised, placed on the form that sent its input: the
services validate (one way for pages, API and files), the forms only show."""

from __future__ import annotations

from typing import ClassVar

from django import forms
from django.core.exceptions import ValidationError


class ServiceErrorsMixin(forms.BaseForm):
    """`add_service_errors` puts each message beside the field it names, or at
    the top of the form when the form has no such field."""

    # A service's field name -> the form field that edits it as text, where they differ.
    text_fields: ClassVar[dict[str, str]] = {}

    def add_service_errors(self, error: ValidationError) -> None:
        if not hasattr(error, "error_dict"):
            self.add_error(None, error.messages)
            return
        for field, messages in error.message_dict.items():
            target = self.text_fields.get(field, field)
            self.add_error(target if target in self.fields else None, messages)
