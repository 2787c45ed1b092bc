"""Customer keys' access rule, registered with the access module
(accounts.access) in KeysConfig.ready: a user lists, uses and deletes their
own keys and their groups' keys; nobody else sees them."""

from __future__ import annotations

from django.db.models import Q

from portal.accounts import access
from portal.accounts.access import Principal
from portal.keys.models import CustomerKey


def customer_key_rule(user: Principal, action: str) -> Q:
    return Q(owner_user=user) | Q(owner_group__in=user.groups.all())


def register() -> None:
    access.register(CustomerKey, customer_key_rule)
