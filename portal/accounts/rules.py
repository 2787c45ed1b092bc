"""API tokens' access rule, registered with the access module in
AccountsConfig.ready: a token is its own user's; anyone else's id names
nothing (staff included: a token is a credential)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from portal.accounts import access
from portal.accounts.models import ApiToken


def token_rule(user: Any, action: str) -> Q:
    return Q(user=user)


def register() -> None:
    access.register(ApiToken, token_rule)
