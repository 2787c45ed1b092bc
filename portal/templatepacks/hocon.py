"""Gobblin-style HOCON templates, parsed safely and resolved to flat properties.

pyhocon alone would read `include` files and URLs from the server and fill
unknown `${…}` from the process environment (leaking SECRET_KEY and friends
into job properties). The sandboxed parser below runs pyhocon's own code with
an empty environment and includes refused.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
import types
from typing import Any

from pyhocon import ConfigTree
from pyhocon import config_parser as _pyhocon_parser
from pyhocon.config_tree import ConfigList, ConfigSubstitution, ConfigValues
from pyhocon.exceptions import ConfigException, ConfigSubstitutionException
from pyparsing import ParseBaseException

INHERIT_KEY = "gobblin.template.inherit"
REQUIRED_KEY = "gobblin.template.required_attributes"
# A flat key that is also the prefix of others (`converter.classes` next to
# `converter.classes.0`) sits under this leaf in the tree; flattening undoes it.
VALUE_LEAF = "__flowport_value__"
MAX_SUBSTITUTION_ROUNDS = 100
# Limits on what substitutions may expand to, checked before pyhocon expands anything: a 1 KB
# template of nested ${a}${a}… references otherwise expands exponentially (56 MB was seen).
MAX_SUBSTITUTION_DEPTH = 16
MAX_EXPANDED_VALUE = 64 * 1024
MAX_EXPANDED_TOTAL = 1024 * 1024
_VARIABLE = re.compile(r"\$\{\??([^}]+)\}")


class HoconError(Exception):
    """A template that is not valid HOCON; the message has line and column."""


class IncludeRefused(ConfigException):
    pass


class _EmptyEnvironment:
    """`os` as pyhocon sees it inside the sandbox: no environment variables."""

    environ: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


class _NoIncludes:
    """`ConfigFactory` as pyhocon's include handling sees it in the sandbox."""

    def __getattr__(self, name: str) -> Any:
        raise IncludeRefused("'include' is not allowed in templates; use gobblin.template.inherit.")


def _sandboxed(method: Any) -> classmethod:
    func = method.__func__
    sandbox_globals = {**vars(_pyhocon_parser), "os": _EmptyEnvironment(), "ConfigFactory": _NoIncludes()}
    clone = types.FunctionType(
        func.__code__, sandbox_globals, func.__name__, func.__defaults__, func.__closure__
    )
    clone.__kwdefaults__ = func.__kwdefaults__
    return classmethod(clone)


# pyhocon rebuilds its grammar on every parse while it changes pyparsing's process-wide default
# whitespace, so two threads parsing at once (gunicorn's threads: a compile preview beside a
# template-attributes request) can fail a valid text with "Expected end of text". Every HOCON parse
# in the portal holds this lock.
PARSE_LOCK = threading.Lock()


class SandboxedParser(_pyhocon_parser.ConfigParser):
    parse = _sandboxed(_pyhocon_parser.ConfigParser.parse)
    _resolve_variable = _sandboxed(_pyhocon_parser.ConfigParser._resolve_variable)
    _fixup_self_references = _sandboxed(_pyhocon_parser.ConfigParser._fixup_self_references)


# Separators and brackets a person types; not comment markers, nor the
# internals of `include url(...)`.
_GRAMMAR_LITERAL = re.compile(r"'([=:+\]\[{},]{1,2})'")


def _expected(message: str) -> str:
    """pyparsing names the whole grammar rule it expected, thousands of
    characters for a key without a separator; a person needs the tokens."""
    if len(message) <= 80:
        return message
    tokens = list(dict.fromkeys(_GRAMMAR_LITERAL.findall(message)))
    if not tokens:
        return "unexpected text"
    quoted = [f"'{t}'" for t in tokens[:5]]
    return "Expected " + (quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}")


def parse_template(text: str, name: str) -> ConfigTree:
    """The unresolved tree of one template (substitutions resolve later,
    once the parent chain and the flow's properties are known)."""
    try:
        with PARSE_LOCK:
            tree = SandboxedParser.parse(text, resolve=False)
    except ParseBaseException as error:
        raise HoconError(
            f"{name}: invalid HOCON at line {error.lineno}, column {error.col}: {_expected(error.msg)}"
            + (f" (near {error.line.strip()[:60]!r})" if error.line.strip() else "")
        ) from None
    except ConfigException as error:
        raise HoconError(f"{name}: {error}") from None
    except RecursionError:
        raise HoconError(f"{name}: nested too deeply.") from None
    if not isinstance(tree, ConfigTree):
        raise HoconError(f"{name}: a template must be an object of properties, not a list.")
    return tree


def plain_value(tree: ConfigTree, key: str) -> str | int | float | None:
    """A scalar setting read before resolution (inherit URI, required list); HOCON
    reads an unquoted number (or true/false) as one, so callers take its text."""
    try:
        value = tree.get(key, None)
    except ConfigException:
        return None
    if isinstance(value, (ConfigList, list)):
        return ",".join(str(item) for item in value)
    return value if isinstance(value, (str, int, float)) else None


def required_attributes(tree: ConfigTree) -> list[str]:
    value = str(plain_value(tree, REQUIRED_KEY) or "")
    return [item.strip() for item in value.split(",") if item.strip()]


def tree_from_flat(properties: dict[str, str]) -> ConfigTree:
    """A tree of flat properties, keeping both `a` and `a.b` (see VALUE_LEAF).
    Keys are set directly, never parsed, so any characters are safe."""
    root = ConfigTree(root=True)
    for key in sorted(properties, key=lambda k: k.count(".")):
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part) if part in node else None
            if not isinstance(child, ConfigTree):
                subtree = ConfigTree()
                if child is not None:
                    subtree[VALUE_LEAF] = child
                node[part] = subtree
                child = subtree
            node = child
        leaf = parts[-1]
        if isinstance(node.get(leaf) if leaf in node else None, ConfigTree):
            node[leaf][VALUE_LEAF] = properties[key]
        else:
            node[leaf] = properties[key]
    return root


def _to_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, ConfigList)):
        # Gobblin's convention: a HOCON list becomes a comma-separated property.
        return ",".join(
            _to_string(item) if not isinstance(item, dict) else json.dumps(item) for item in value
        )
    return str(value)


def flatten(tree: ConfigTree, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        full = prefix if key == VALUE_LEAF else (f"{prefix}.{key}" if prefix else key)
        if isinstance(value, ConfigTree):
            flat.update(flatten(value, full))
        else:
            flat[full] = _to_string(value)
    return flat


def _lookup(tree: ConfigTree, path: list[str]) -> bool:
    """Is `path` set in `tree`? As in Typesafe Config, a path through a value
    that is not an object (`a.b` when `a` is a string) is simply not set."""
    node: Any = tree
    for part in path:
        if not isinstance(node, ConfigTree) or part not in node:
            return False
        node = node[part]
    return True


def _drop_undefined_optionals(merged: ConfigTree) -> None:
    """Resolve every `${?a.b.c}` that no layer sets to nothing, before pyhocon
    resolves the rest.

    Typesafe Config (which Gobblin's templates are written for) treats an
    optional substitution of an unset path as absent: the field keeps its
    earlier value or is not created, and in a concatenation it is the empty
    string. pyhocon 0.3 instead fails in two cases: when the path runs through
    a value that is not an object, and when the path starts with the key that
    holds the substitution and that key was merged from several layers (it
    takes it for a self-reference and looks the rest of the path up in the
    earlier layer, which raises "No configuration setting found for key …").
    Gobblin's multi-hop templates hit the second one
    (`gobblin.dataset.pattern=${from}/${?gobblin.flow.edge.input.dataset.descriptor.subPaths}`
    beside the flow's own `gobblin.flow.*` properties)."""
    for substitution in SandboxedParser._find_substitutions(merged):
        if not substitution.optional:
            continue
        path = ConfigTree.parse_key(substitution.variable)
        history = merged.history.get(path[0], []) if hasattr(merged, "history") else []
        earlier = [item for item in history if isinstance(item, ConfigTree)]
        if _lookup(merged, path) or any(_lookup(item, path[1:]) for item in earlier):
            continue
        # pyhocon's own step for an unresolved optional substitution: the
        # field keeps the value it overrides, or disappears.
        SandboxedParser._do_substitute(substitution, None, False)


def _leaves(tree: ConfigTree, prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in tree.items():
        full = prefix if key == VALUE_LEAF else (f"{prefix}.{key}" if prefix else key)
        if isinstance(value, ConfigTree):
            found.update(_leaves(value, full))
        else:
            found[full] = value
    return found


def plain_leaves(tree: ConfigTree) -> dict[str, str]:
    """Every key of an unresolved tree, with its text where it is a plain scalar (a value built
    from substitutions is given as its literal parts joined, enough to see ENC(...) or a path)."""
    found = {}
    for key, value in _leaves(tree).items():
        if isinstance(value, ConfigValues):
            found[key] = "".join(str(t) for t in value.tokens if not isinstance(t, ConfigSubstitution))
        elif isinstance(value, (list, ConfigList)):
            found[key] = ",".join(str(item) for item in value if isinstance(item, (str, int, float)))
        else:
            found[key] = "" if value is None else str(value)
    return found


def check_expansion(tree: ConfigTree) -> None:
    """HoconError naming the limit when the merged, unresolved tree would expand past
    MAX_SUBSTITUTION_DEPTH levels, MAX_EXPANDED_VALUE characters in one value or
    MAX_EXPANDED_TOTAL in all: sizes are summed over the substitution graph, nothing is expanded."""
    leaves = _leaves(tree)
    memo: dict[str, tuple[int, int]] = {}

    def measure(value: Any, stack: tuple[str, ...]) -> tuple[int, int]:
        if isinstance(value, ConfigSubstitution):
            return variable(value.variable, stack)
        if isinstance(value, ConfigValues):
            parts = [measure(token, stack) for token in value.tokens]
            return sum(p[0] for p in parts), max((p[1] for p in parts), default=0)
        if isinstance(value, (list, ConfigList)):
            parts = [measure(item, stack) for item in value]
            return sum(p[0] + 1 for p in parts), max((p[1] for p in parts), default=0)
        if isinstance(value, ConfigTree):
            parts = [measure(item, stack) for item in _leaves(value).values()]
            return sum(p[0] for p in parts), max((p[1] for p in parts), default=0)
        return len(str(value)) if value is not None else 0, 0

    def variable(name: str, stack: tuple[str, ...]) -> tuple[int, int]:
        if name in stack:  # a self-reference (a = ${a}"x"): pyhocon resolves it from the earlier value
            return 0, 0
        if name not in memo:
            if name in leaves:
                size, depth = measure(leaves[name], (*stack, name))
            else:  # an object: everything under it
                under = [measure(v, (*stack, name)) for k, v in leaves.items() if k.startswith(name + ".")]
                size, depth = sum(p[0] for p in under), max((p[1] for p in under), default=0)
            memo[name] = (size, depth + 1)
        size, depth = memo[name]
        if depth > MAX_SUBSTITUTION_DEPTH:
            raise HoconError(
                f"{name!r}: substitutions nest deeper than {MAX_SUBSTITUTION_DEPTH} levels (the limit)."
            )
        return size, depth

    total = 0
    for key, value in leaves.items():
        size, _depth = measure(value, (key,))
        if size > MAX_EXPANDED_VALUE:
            raise HoconError(
                f"{key!r} would expand to more than {MAX_EXPANDED_VALUE} characters (the limit)."
            )
        total += size
        if total > MAX_EXPANDED_TOTAL:
            raise HoconError(
                f"the templates would expand to more than {MAX_EXPANDED_TOTAL} characters (the limit)."
            )


def resolve_layers(layers: list[ConfigTree]) -> tuple[dict[str, str], list[str]]:
    """Merge layers (lowest precedence first), resolve `${…}`, flatten.

    Returns the flat properties and the variables no layer supplies: those
    are missing attributes, reported to the user instead of failing."""
    missing: list[str] = []
    for _round in range(MAX_SUBSTITUTION_ROUNDS):
        merged = ConfigTree(root=True)
        for layer in layers:
            ConfigTree.merge_configs(merged, copy.deepcopy(layer))
        if missing:
            ConfigTree.merge_configs(merged, tree_from_flat(dict.fromkeys(missing, "")))
        check_expansion(merged)
        try:
            _drop_undefined_optionals(merged)
            SandboxedParser.resolve_substitutions(merged)
        except ConfigSubstitutionException as error:
            match = _VARIABLE.search(str(error))
            if match is None or match.group(1) in missing or "Cannot resolve variable" not in str(error):
                raise HoconError(str(error)) from None
            missing.append(match.group(1))
            continue
        except ConfigException as error:
            raise HoconError(f"cannot resolve a substitution: {error}") from None
        flat = flatten(merged)
        for placeholder in missing:  # not a real value: keep it out of the job
            flat.pop(placeholder, None)
        return flat, missing
    raise HoconError("Too many unresolved substitutions.")
