"""Gobblin-style HOCON templates, parsed safely and resolved to flat properties.

pyhocon alone would read `include` files and URLs from the server and fill
unknown `${…}` from the process environment (leaking SECRET_KEY and friends
into job properties). The sandboxed parser below runs pyhocon's own code with
an empty environment and includes refused.

Nor does pyhocon bound what it builds: a few hundred bytes of template can ask
it for gigabytes or hours. What it copies while resolving is sized before each
copy (`_Budget`) and what it copies while reading is counted (`_CountedTree`),
so a template is refused at a limit (`ExpansionLimit`, naming the key), before
anything large is built.
"""

from __future__ import annotations

import contextvars
import copy
import json
import os
import re
import threading
import types
from dataclasses import dataclass
from typing import Any

from pyhocon import ConfigTree
from pyhocon import config_parser as _pyhocon_parser
from pyhocon.config_tree import ConfigList, ConfigQuotedString, ConfigSubstitution, ConfigValues
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
# What the graph above cannot see (a key concatenated with its own earlier value, `a = ${a}${a}`,
# doubles at each line: 370 bytes reached 671 MB; `a = ${a} {…}` costs pyhocon 2^n merges) is
# measured as pyhocon copies it (`_Budget`): every substitution's value is sized before it is
# copied; one resolution may copy MAX_EXPANDED_TOTAL characters and MAX_COPIED_VALUES values (object
# entries, list elements) in all, in MAX_SUBSTITUTION_STEPS substitutions, and nest no value deeper
# than MAX_VALUE_NESTING objects or lists.
MAX_SUBSTITUTION_STEPS = 10_000
MAX_COPIED_VALUES = 5_000
MAX_VALUE_NESTING = 64
# Keys pyhocon may copy while reading one template (`_CountedTree`).
MAX_PARSE_COPIES = 10_000
_VARIABLE = re.compile(r"\$\{\??([^}]+)\}")


class HoconError(Exception):
    """A template that is not valid HOCON; the message has line and column."""


class ExpansionLimit(HoconError):
    """Templates that would expand past one of the limits above; the message names the key and
    the limit."""


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


class ParseLimit(ConfigException):
    """A template whose reading would copy more than MAX_PARSE_COPIES keys."""


class _CountedTree(ConfigTree):
    """A tree as the sandboxed parser builds it, counting what pyhocon copies: each statement that
    adds to an object at the root (`a.k1 = …`, then `a.k2 = …`) copies the whole object to keep
    its history, so n such statements cost n²/2 copies (2,000 of them, 30 KB, took a minute)."""

    copies = 0

    def _put(self, key_path: list[str], value: Any, append: bool = False) -> None:
        existing = dict.get(self, key_path[0]) if self.root and len(key_path) == 1 else None
        if isinstance(existing, ConfigTree) and isinstance(value, ConfigTree):
            self.copies += _merge_copies(existing, value)
            if self.copies > MAX_PARSE_COPIES:
                raise ParseLimit(
                    f"{key_path[0]!r}: statements adding to this object one by one copy more than "
                    f"{MAX_PARSE_COPIES} keys (the limit); write its keys inside one {key_path[0]} {{ … }}."
                )
        super()._put(key_path, value, append)


def _merge_copies(existing: ConfigTree, added: ConfigTree) -> int:
    """Keys pyhocon copies to merge `added` into a copy of `existing` (dict's own views: the
    tree's lookups are what is slow)."""
    copies = len(existing)
    for key, value in dict.items(added):
        old = dict.get(existing, key)
        if isinstance(old, ConfigTree) and isinstance(value, ConfigTree):
            copies += _merge_copies(old, value)
    return copies


def _with_globals(func: Any, overrides: dict[str, Any]) -> Any:
    clone = types.FunctionType(
        func.__code__, {**func.__globals__, **overrides}, func.__name__, func.__defaults__, func.__closure__
    )
    clone.__kwdefaults__ = func.__kwdefaults__
    return clone


class _BuildsCountedTrees(type):
    """`ConfigTree` as the parser's tree builder names it: what it builds is a _CountedTree, what
    it asks `isinstance` of is any ConfigTree (pyhocon's own code makes plain ones too)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> _CountedTree:
        return _CountedTree(*args, **kwargs)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, ConfigTree)

    def __getattr__(cls, name: str) -> Any:
        return getattr(ConfigTree, name)


class _ConfigTreeName(metaclass=_BuildsCountedTrees):
    pass


class _CountingTreeParser(_pyhocon_parser.ConfigTreeParser):
    postParse = _with_globals(_pyhocon_parser.ConfigTreeParser.postParse, {"ConfigTree": _ConfigTreeName})


def _sandboxed(method: Any) -> classmethod:
    sandbox = {
        "os": _EmptyEnvironment(),
        "ConfigFactory": _NoIncludes(),
        "ConfigTreeParser": _CountingTreeParser,
    }
    return classmethod(_with_globals(method.__func__, sandbox))


# pyhocon rebuilds its grammar on every parse while it changes pyparsing's process-wide default
# whitespace, so two threads parsing at once (gunicorn's threads: a compile preview beside a
# template-attributes request) can fail a valid text with "Expected end of text". Every HOCON parse
# in the portal holds this lock.
PARSE_LOCK = threading.Lock()


class SandboxedParser(_pyhocon_parser.ConfigParser):
    parse = _sandboxed(_pyhocon_parser.ConfigParser.parse)
    _resolve_variable = _sandboxed(_pyhocon_parser.ConfigParser._resolve_variable)
    _fixup_self_references = _sandboxed(_pyhocon_parser.ConfigParser._fixup_self_references)

    @classmethod
    def _do_substitute(cls, substitution: Any, resolved_value: Any, is_optional_resolved: bool = True) -> Any:
        # Every value pyhocon puts in place of a ${...} passes here, before it is copied.
        budget = _BUDGET.get()
        if budget is not None:
            budget.charge(substitution, resolved_value)
        return super()._do_substitute(substitution, resolved_value, is_optional_resolved)


@dataclass
class _Size:
    chars: int = 0  # keys count, and one character per object, list or element
    work: int = 0  # values pyhocon copies or merges one by one (UNRESOLVED_WORK for an unresolved one)
    nesting: int = 0  # objects and lists inside each other


# A value still holding substitutions is copied with its tokens, its container and the values it
# overrides: measured, about twenty times an object entry.
UNRESOLVED_WORK = 20


def _measure(value: Any, limit: int) -> _Size:
    """The size of a value as pyhocon holds it, counted only until the characters pass `limit`
    or the nesting passes MAX_VALUE_NESTING: a structure that shares parts or holds itself costs
    no more than that."""
    found = _Size()
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending and found.chars <= limit and found.nesting <= MAX_VALUE_NESTING:
        item, depth = pending.pop()
        if isinstance(item, ConfigTree):
            # dict's own views: ConfigTree's item lookup parses each key again (slow).
            keys = dict.keys(item)
            found.chars += 1 + sum(len(str(key)) + 1 for key in keys)
            found.work += len(keys)
            found.nesting = max(found.nesting, depth + 1)
            pending.extend((child, depth + 1) for child in dict.values(item))
        elif isinstance(item, list):
            found.chars += 1 + len(item)
            found.work += len(item)
            found.nesting = max(found.nesting, depth + 1)
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, ConfigValues):
            found.chars += 1
            found.work += UNRESOLVED_WORK
            pending.extend((token, depth) for token in item.tokens)
        elif isinstance(item, ConfigSubstitution):
            found.chars += len(item.variable) + 3
        elif isinstance(item, ConfigQuotedString):
            found.chars += len(item.value)
        elif item is not None:
            found.chars += len(str(item))
    return found


def _earlier_values(holder: ConfigValues) -> list[Any]:
    """The values the key `holder` sets had before it, newest first, as far as pyhocon merges
    them into an object (up to one past MAX_VALUE_NESTING of them)."""
    found: list[Any] = []
    node = holder.overridden_value
    while isinstance(node, (ConfigValues, ConfigTree)) and len(found) <= MAX_VALUE_NESTING:
        found.append(node)
        node = node.overridden_value if isinstance(node, ConfigValues) else None
    return found


def _rebuild_work(earlier: list[Any], limit: int) -> int:
    """What pyhocon merges to build an object on top of its `earlier` values: it keeps no result,
    so each earlier value that was itself built on older ones is built again, and a key extended
    n times (`a = ${a} {…}`) costs 2^n merges though it stays small."""
    work = 0
    for node in reversed(earlier):  # oldest first
        if isinstance(node, ConfigValues):
            work = 2 * work + sum(_measure(token, limit).work for token in node.tokens)
        else:
            work += _measure(node, limit).work
        if work > limit:
            break
    return work


class _Budget:
    """What one resolution has copied and merged so far; refuses the step that would pass a limit.

    pyhocon grows a value only by copying what a substitution stands for into it, and spends its
    time copying and merging, so sizing each such value before the copy (with the value it lands
    in and the objects merged with it) bounds memory and time, whatever HOCON feature asked for
    the copy: a key concatenated or merged with its own earlier value, `+=`, a list of copies, a
    chain of templates."""

    def __init__(self, tree: ConfigTree) -> None:
        # The flat key of each value holding substitutions (and of the values it overrides).
        self.keys: dict[int, str] = {}
        for key, value in _leaves(tree).items():
            while isinstance(value, ConfigValues):
                self.keys.setdefault(id(value), key)
                value = value.overridden_value
        self.copied = 0
        self.work = 0
        self.steps = 0

    def charge(self, substitution: ConfigSubstitution, value: Any) -> None:
        holder = substitution.parent
        # A value inside a list knows only its index: the substitution names it then.
        key = self.keys.get(id(holder)) or (
            holder.key if isinstance(holder.key, str) else "${" + substitution.variable + "}"
        )
        self.steps += 1
        if self.steps > MAX_SUBSTITUTION_STEPS:
            raise ExpansionLimit(f"{key!r}: more than {MAX_SUBSTITUTION_STEPS} substitutions (the limit).")
        if isinstance(value, ConfigValues):  # not resolved yet: pyhocon keeps it for a later pass
            return
        size = _measure(value, MAX_EXPANDED_VALUE)
        work = size.work  # the copy
        others = [token for index, token in enumerate(holder.tokens) if index != substitution.index]
        merged = isinstance(value, ConfigTree) or any(isinstance(token, ConfigTree) for token in others)
        earlier = _earlier_values(holder) if merged else []
        for token in others + earlier:  # an object also lands on the objects it overrides
            if size.chars > MAX_EXPANDED_VALUE or size.nesting > MAX_VALUE_NESTING:
                break
            more = _measure(token, MAX_EXPANDED_VALUE - size.chars)
            size.chars += more.chars
            size.work += more.work
            size.nesting = max(size.nesting, more.nesting)
        if size.nesting > MAX_VALUE_NESTING:
            raise ExpansionLimit(
                f"{key!r} would nest objects or lists deeper than {MAX_VALUE_NESTING} levels (the limit)."
            )
        if size.chars > MAX_EXPANDED_VALUE:
            raise ExpansionLimit(
                f"{key!r} would expand to more than {MAX_EXPANDED_VALUE} characters (the limit)."
            )
        self.copied += size.chars
        if self.copied > MAX_EXPANDED_TOTAL:
            raise ExpansionLimit(
                f"the templates would expand to more than {MAX_EXPANDED_TOTAL} characters (the limit), "
                f"at {key!r}."
            )
        if merged:  # the merge walks every value it lands on, and rebuilds the earlier ones
            work = size.work + _rebuild_work(earlier, MAX_COPIED_VALUES)
        self.work += work
        if self.work > MAX_COPIED_VALUES:
            raise ExpansionLimit(
                f"{key!r} would make the templates copy or merge more than {MAX_COPIED_VALUES} values "
                "(the limit)."
            )


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("hocon_budget", default=None)


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


def check_expansion(tree: ConfigTree) -> None:  # noqa: C901
    """ExpansionLimit naming the limit when the merged, unresolved tree would expand past
    MAX_SUBSTITUTION_DEPTH levels, MAX_EXPANDED_VALUE characters in one value or
    MAX_EXPANDED_TOTAL in all: sizes are summed over the substitution graph, nothing is expanded.
    A self-reference counts nothing here; the budget measures it as pyhocon resolves it."""
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
            raise ExpansionLimit(
                f"{name!r}: substitutions nest deeper than {MAX_SUBSTITUTION_DEPTH} levels (the limit)."
            )
        return size, depth

    total = 0
    for key, value in leaves.items():
        size, _depth = measure(value, (key,))
        if size > MAX_EXPANDED_VALUE:
            raise ExpansionLimit(
                f"{key!r} would expand to more than {MAX_EXPANDED_VALUE} characters (the limit)."
            )
        total += size
        if total > MAX_EXPANDED_TOTAL:
            raise ExpansionLimit(
                f"the templates would expand to more than {MAX_EXPANDED_TOTAL} characters (the limit)."
            )


def _unset_variables(merged: ConfigTree) -> list[str]:
    """The variables of required substitutions that no layer sets, all at once: pyhocon names one
    per failed resolution, and each retry costs a whole resolution. A path through a value that is
    not an object is left to pyhocon, which says what is wrong with it."""
    unset: list[str] = []
    for substitution in SandboxedParser._find_substitutions(merged):
        if substitution.optional or substitution.variable in unset:
            continue
        node: Any = merged
        for part in ConfigTree.parse_key(substitution.variable):
            if not isinstance(node, ConfigTree):
                break
            if part not in node:
                unset.append(substitution.variable)
                break
            node = node[part]
    return unset


def resolve_layers(layers: list[ConfigTree]) -> tuple[dict[str, str], list[str]]:
    """Merge layers (lowest precedence first), resolve `${…}`, flatten.

    Returns the flat properties and the variables no layer supplies: those
    are missing attributes, reported to the user instead of failing."""
    missing: list[str] = []
    for round_ in range(MAX_SUBSTITUTION_ROUNDS):
        merged = ConfigTree(root=True)
        for layer in layers:
            ConfigTree.merge_configs(merged, copy.deepcopy(layer))
        if round_ == 0:
            missing = _unset_variables(merged)
        if missing:
            ConfigTree.merge_configs(merged, tree_from_flat(dict.fromkeys(missing, "")))
        check_expansion(merged)
        budget = _BUDGET.set(_Budget(merged))
        try:
            _drop_undefined_optionals(merged)
            SandboxedParser.resolve_substitutions(merged)
        except RecursionError:  # pyhocon recurses into what it copies; the budget bounds most of it
            raise ExpansionLimit(
                f"the templates would nest objects or lists deeper than {MAX_VALUE_NESTING} levels (the limit)."
            ) from None
        except ConfigSubstitutionException as error:
            match = _VARIABLE.search(str(error))
            if match is None or match.group(1) in missing or "Cannot resolve variable" not in str(error):
                raise HoconError(str(error)) from None
            missing.append(match.group(1))
            continue
        except ConfigException as error:
            raise HoconError(f"cannot resolve a substitution: {error}") from None
        finally:
            _BUDGET.reset(budget)
        flat = flatten(merged)
        for placeholder in missing:  # not a real value: keep it out of the job
            flat.pop(placeholder, None)
        return flat, missing
    raise HoconError("Too many unresolved substitutions.")
