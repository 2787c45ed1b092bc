"""A compiled job's properties as the portal shows them (the API's jobs and compile preview, the
form's preview): the compiler copies each hop node's connection values into ``flowport.hop.<role>.*``
keys — its login, its ENC(...) password and wrapped key, which are the node's owners' and staff's
to see, on the node's own page — and a node written before secrets in URLs were refused may hold
one in clear (:func:`portal.topology.credentials.masked`)."""

from __future__ import annotations

from portal.topology.credentials import masked
from portal.topology.nodefields import masked_properties

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


def shown_properties(properties: dict[str, object]) -> dict[str, object]:
    return {key: shown_property(key, value) for key, value in properties.items()}
