"""Login and token forms, and the forms staff manage users and groups with."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError

from portal.accounts.backends import directory_unreachable


class DirectoryAuthenticationForm(AuthenticationForm):
    """Django's login form, plus a clear message when the directory is down
    (django-auth-ldap alone would report it as a wrong password)."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "directory_down": (
            "The login directory cannot be reached right now, so your password could not be "
            "checked. Try again in a few minutes; if it persists, tell the portal administrators."
        ),
    }

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            if directory_unreachable(self.request):
                raise ValidationError(self.error_messages["directory_down"], code="directory_down") from None
            raise


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, e.g. 'nightly-import script'.")
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires",
        help_text="Optional, e.g. 2030-12-31 23:59 (UTC). Empty = until revoked.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )

    def add_model_errors(self, error: ValidationError) -> None:
        for field, messages in error.message_dict.items():
            self.add_error(field if field in self.fields else None, messages)


class NewUserForm(UserCreationForm):
    """Django's form for a new user (username, the password twice, its validators), plus the
    email, staff and groups a staff member sets at once."""

    groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="What they may use: data nodes and template packs are shared with groups.",
    )

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email", "first_name", "last_name", "is_staff", "groups")
        help_texts = {"is_staff": "Staff manage the topology, users and groups, and see every flow."}


class UserGroupsForm(forms.Form):
    groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.order_by("name"), required=False, widget=forms.CheckboxSelectMultiple
    )


class GroupForm(forms.ModelForm):
    class Meta:
        model = Group
        fields = ("name",)
        help_texts = {"name": "Data nodes and template packs are shared with groups by this name."}
