"""Access rules of accounts' objects, registered with the access module in
AccountsConfig.ready. A token is its own user's; anyone else's id names
nothing (staff included: a token is a credential). A user acts for the
groups they belong to (a group then owns what they make: a customer key);
superusers act for every group."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db.models import Q

from portal.accounts import access
from portal.accounts.access import Principal
from portal.accounts.models import ApiToken


def token_rule(user: Principal, action: str) -> Q:
    return Q(user=user)


def group_rule(user: Principal, action: str) -> Q:
    return Q() if user.is_superuser else Q(user=user)


def register() -> None:
    access.register(ApiToken, token_rule)
    access.register(Group, group_rule)
