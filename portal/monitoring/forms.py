"""The subscription form of the flow's subscription page."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.events import sinks
from portal.monitoring import subscriptions
from portal.monitoring.models import Subscription


class SubscriptionForm(forms.ModelForm):
    class Meta:
        model = Subscription
        fields = list(subscriptions.CHOICES)
        labels = {
            "on_failure": "Failure",
            "on_sla_miss": "SLA miss",
            "on_recovery": "Recovery",
            "on_success": "Every success",
            "by_email": "Email me",
            "webhook_url": "Webhook URL",
            "webhook_format": "Webhook body",
        }
        widgets = {"webhook_url": forms.URLInput(attrs={"placeholder": "https://hooks.example.org/flowport"})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["webhook_format"].required = False
        where = sinks.email_destination()
        if where:  # the embedded mode: say where "email" goes instead of a mail server
            self.fields["by_email"].help_text += " " + where
        self._stored_webhook = self.instance.webhook_url
        if self._stored_webhook:
            self.initial["webhook_url"] = subscriptions.masked_webhook(self._stored_webhook)
            self.fields[
                "webhook_url"
            ].help_text += " Its path is not shown again; leave it as it is to keep it."

    def clean_webhook_format(self) -> str:
        """Optional: a form without the choice (an older page, a script) keeps JSON."""
        return self.cleaned_data["webhook_format"] or Subscription.WebhookFormat.JSON

    def clean_webhook_url(self) -> str:
        return subscriptions.keep_or_replace(self._stored_webhook, self.cleaned_data["webhook_url"].strip())

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # BaseModelForm has it; django-stubs lacks it
        try:
            subscriptions.check(self.instance)
        except ValidationError as error:
            for field, messages in error.message_dict.items():
                for message in messages:
                    if field in self.fields and not self.has_error(field):
                        self.add_error(field, message)
                    elif field not in self.fields:
                        self.add_error(None, message)
