"""Properties for one destination: ``destination.<node>.<key>`` applies to the hop that lands in
the flow's destination ``node`` only, over the flow-wide ``<key>`` (the flow form's write mode per
destination, ``destination.archive.writer.write.mode=overwrite``). Other hops never see such keys,
and no job sees the prefixed form: the pipeline reads plain keys. A prefix, not a suffix: the
properties pass through HOCON, where ``writer.write.mode`` and ``writer.write.mode.x`` would be a
value and an object at one path."""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "destination."


def scoped_key(key: str, node: str) -> str:
    return f"{PREFIX}{node}.{key}"


def for_destination(properties: dict[str, str], node: str, destinations: Iterable[str]) -> dict[str, str]:
    """The properties of the hop landing in ``node``: the plain keys, its own scoped ones winning;
    the keys scoped to the flow's other destinations left out."""
    prefixes = tuple(scoped_key("", name) for name in destinations)
    plain = {k: v for k, v in properties.items() if not k.startswith(prefixes)}
    own = scoped_key("", node)
    for key, value in properties.items():
        if key.startswith(own) and len(key) > len(own):
            plain[key[len(own) :]] = value
    return plain
