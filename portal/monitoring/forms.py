"""The subscription form of the flow's subscription page."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.monitoring import subscriptions
from portal.monitoring.models import Subscription


class SubscriptionForm(forms.ModelForm):
    class Meta:
        model = Subscription
        fields = ["on_failure", "on_sla_miss", "on_recovery", "by_email", "webhook_url"]
        labels = {
            "on_failure": "Failure",
            "on_sla_miss": "SLA miss",
            "on_recovery": "Recovery",
            "by_email": "Email me",
            "webhook_url": "Webhook URL",
        }
        widgets = {"webhook_url": forms.URLInput(attrs={"placeholder": "https://hooks.example.org/flowport"})}

    def _post_clean(self) -> None:
        super()._post_clean()
        try:
            subscriptions.check(self.instance)
        except ValidationError as error:
            for field, messages in error.message_dict.items():
                for message in messages:
                    if field in self.fields and not self.has_error(field):
                        self.add_error(field, message)
                    elif field not in self.fields:
                        self.add_error(None, message)
