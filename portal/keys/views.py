"""The Keys page: your customer keys (wrapped), and wrapping a new one."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from portal.keys import services
from portal.keys.forms import WrapKeyForm
from portal.keys.models import CustomerKey

logger = logging.getLogger(__name__)


def _page(request: HttpRequest, form: WrapKeyForm, *, new_key: str | None = None, status: int = 200):
    keys = CustomerKey.objects.usable_by(request.user).select_related("owner_user", "owner_group")
    response = render(
        request, "keys/key_list.html", {"form": form, "keys": keys, "new_key": new_key}, status=status
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def key_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, WrapKeyForm(user=request.user))
    form = WrapKeyForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        result = services.wrap_customer_key(user=request.user, **form.wrap_arguments())
    except ValidationError as error:
        form.add_service_errors(error)
        return _page(request, form, status=400)
    except services.MasterKeyError as error:
        logger.error("master key unavailable: %s", error)
        form.add_error(None, "The portal's master key is not available; an administrator must fix it.")
        return _page(request, form, status=503)
    key = result.customer_key
    messages.success(
        request,
        f"Key “{key.label or key.short_fingerprint}” of {key.owner_name} is wrapped with the master key "
        "and stored.",
    )
    # Rendered, not redirected: a generated key must never travel in a URL or session.
    return _page(request, WrapKeyForm(user=request.user), new_key=result.generated_key, status=201)
