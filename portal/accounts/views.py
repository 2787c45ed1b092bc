"""Login page and the profile page with personal API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.accounts import tokens
from portal.accounts.backends import directory_description
from portal.accounts.forms import DirectoryAuthenticationForm, TokenForm
from portal.accounts.models import ApiToken
from portal.accounts.requests import AuthenticatedRequest


class LoginView(auth_views.LoginView):
    form_class = DirectoryAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "directory_description": directory_description()}


def _profile(
    request: HttpRequest, form: TokenForm, new_key: str | None = None, status: int = 200
) -> HttpResponse:
    context = {
        "form": form,
        "tokens": ApiToken.objects.restrict(request.user),
        "new_key": new_key,
        "groups": request.user.groups.order_by("name"),
    }
    return render(request, "accounts/profile.html", context, status=status)


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    return _profile(request, TokenForm())


@login_required
@require_POST
def token_create(request: AuthenticatedRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            token, key = tokens.create_token(request.user, **form.cleaned_data)
        except ValidationError as error:
            form.add_model_errors(error)
        else:
            # Rendered, not redirected: the key must never travel in a URL or session.
            messages.success(request, f"Token {token.name!r} created. Copy it now: it is shown only once.")
            response = _profile(request, TokenForm(), new_key=key, status=201)
            response["Cache-Control"] = "no-store"
            return response
    return _profile(request, form, status=400)


@login_required
@require_POST
def token_revoke(request: AuthenticatedRequest, token_id: int) -> HttpResponse:
    try:
        token = tokens.revoke_token(request.user, token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("accounts:profile")
