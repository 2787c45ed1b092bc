"""The column rules' keys and what a save refuses in them (no Spark here: the web tier and the
keys app ask it; :mod:`portal.pipeline.columns` applies the rules)."""

from __future__ import annotations

from portal.pipeline.properties import Properties

DROP, HASH, ENCRYPT, SALT = "columns.drop", "columns.hash", "columns.encrypt", "columns.hash.secret"
RULES = (DROP, HASH, ENCRYPT)
WRAPPED_KEY = "encrypt.wrapped.key"


def wanted(props: Properties) -> dict[str, list[str]]:
    """The rules' columns, by key."""
    return {key: props.get_list(key) for key in RULES if props.get_list(key)}


def needs_key(properties: dict[str, str]) -> bool:
    """Whether the rules need the customer key: an encrypt rule, or a hash rule without its own salt."""
    props = Properties(properties)
    return bool(props.get_list(ENCRYPT)) or (bool(props.get_list(HASH)) and not props.get(SALT))


def rule_problems(properties: dict[str, str]) -> list[str]:
    """What a save refuses: a column under two rules, a rule that needs the customer key without one."""
    props = Properties(properties)
    rules = wanted(props)
    problems = overlaps(rules)
    if ENCRYPT in rules and not props.get(WRAPPED_KEY):
        problems.append(
            f"{ENCRYPT} encrypts under the flow owner's customer key, and the flow has none "
            "(encrypt.wrapped.key): add a customer key under Keys first"
        )
    if HASH in rules and not props.get(SALT) and not props.get(WRAPPED_KEY):
        problems.append(
            f"{HASH} needs a salt: {SALT} (as ENC(...)), or a customer key of the flow owner "
            "(encrypt.wrapped.key) to derive one from"
        )
    return problems


def overlaps(rules: dict[str, list[str]]) -> list[str]:
    seen: dict[str, str] = {}
    problems = []
    for key, names in rules.items():
        for name in names:
            if name in seen and seen[name] != key:
                problems.append(f"column '{name}' is in both {seen[name]} and {key}: give it one rule")
            seen.setdefault(name, key)
    return problems
