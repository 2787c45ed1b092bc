"""A compiled job's properties as the portal shows them (the API's jobs and compile preview, the
form's preview): the compiler copies each hop node's connection values into ``flowport.hop.<role>.*``
keys — its login, its ENC(...) password and wrapped key, which are the node's owners' and staff's
to see, on the node's own page — and a node written before secrets in URLs were refused may hold
one in clear (:func:`portal.topology.credentials.masked`). A hop node's root folder on the portal's
server is staff's to see, as on the node's page (:func:`portal.topology.nodefields.root_shown`)."""

from __future__ import annotations

from typing import Any

from portal.accounts.access import Principal
from portal.topology.credentials import masked
from portal.topology.nodefields import masked_properties, root_shown

HOP = "flowport.hop."  # the compiler's keys for a hop's nodes: flowport.hop.<role>.<node key>


def shown_property(key: str, value: object) -> object:
    """``value`` of job property ``key`` as shown to anyone who may see the flow: a hop key as a
    node's connection is shown to one who is not its owner (:func:`masked_properties`), any other
    with the clear secrets inside it masked."""
    if not isinstance(value, str):
        return value
    role, _, node_key = key.removeprefix(HOP).partition(".")
    if key.startswith(HOP) and role and node_key:
        return masked_properties({node_key: value})[node_key]
    return masked(value)


def shown_properties(properties: dict[str, Any], user: Principal | None) -> dict[str, Any]:
    """A compiled job's properties as `user` reads them: each as :func:`shown_property` shows
    it, and a hop node's server root (``flowport.hop.<role>.path``, its kind beside it in
    ``flowport.hop.<role>.kind``) in words for anyone but staff."""
    shown: dict[str, Any] = {}
    for key, value in properties.items():
        shown[key] = shown_property(key, value)
        role, _, node_key = key.removeprefix(HOP).partition(".")
        kind = properties.get(f"{HOP}{role}.kind") if key.startswith(HOP) and role and node_key else None
        if isinstance(kind, str):
            shown[key] = root_shown(user, kind, node_key, shown[key])
    return shown
