"""Who may set which job property: the pipeline's property schema.

A flow reaches data only through its data nodes, so every key that says *where* data is read or
written (paths, JDBC URLs and drivers, Spark conf, the hop keys) belongs to the portal, which sets
it from the node the administrator configured. Flow owners and templates set everything else. The
web tier refuses a non-user key at save (400 naming it); the worker checks the same schema again
(it trusts nothing the web tier sent).

Also here, because both tiers need the same answer: which keys name pluggable classes, which key
names say "secret" (their values must be ``ENC(...)``), and the limits on keys and values.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping

from portal.pipeline.loader import ClassLoadError, check_class_path

USER, NODE = "user", "node"

# Keys the portal sets from the data nodes and the compiler (optionally with a ``.N`` branch suffix).
NODE_KEYS = frozenset(
    {
        "source.files.path",
        "source.jdbc.url",
        "source.jdbc.driver",
        "writer.jdbc.url",
        "writer.jdbc.driver",
        "data.publisher.final.dir",
        "writer.staging.dir",
        "writer.output.dir",
        "qualitychecker.row.err.file",
        "job.work.dir",
        "flow.group",
        "flow.name",
        "job.name",
    }
)
NODE_PREFIXES = (
    "flowport.hop.",
    "flowport.executor",
    "spark.",
    "source.jdbc.driver.",
    "source.jdbc.url.",
    "writer.jdbc.url.",
)
_BRANCH = re.compile(r"\.\d+\Z")

# Keys whose value is a pluggable class (or a comma list of them; bare names are built-ins).
CLASS_KEYS = frozenset({"source.class", "fork.operator.class", "writer.builder.class"})
CLASS_LIST_KEYS = frozenset(
    {"converter.classes", "qualitychecker.row.policies", "qualitychecker.task.policies"}
)

# A key names a secret when one of its words is one of these (``fork.one.pass`` is not a secret).
_SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "secret", "secrets", "token", "credential", "credentials"}
)
_SECRET_PAIRS = frozenset({("private", "key"), ("api", "key"), ("access", "key"), ("secret", "key")})
_SECRET_JOINED = frozenset({"privatekey", "apikey", "accesskey", "secretkey", "accesstoken"})

MAX_KEY_LENGTH = 256
MAX_VALUE_LENGTH = 64 * 1024
# C0 controls and DEL; tab, newline and carriage return are allowed in values (SQL, lists).
_CONTROL_IN_KEY = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_VALUE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SAFE_URN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:=-]{0,254}\Z")


def base_key(key: str) -> str:
    """``writer.staging.dir.1`` -> ``writer.staging.dir``."""
    return _BRANCH.sub("", key)


@functools.lru_cache(maxsize=8192)  # pure; a recompile batch asks it of the same keys per flow
def owner_of(key: str) -> str:
    """``node`` for keys only the portal sets from data nodes, else ``user``."""
    if key.startswith(NODE_PREFIXES):
        return NODE
    return NODE if base_key(key) in NODE_KEYS else USER


@functools.lru_cache(maxsize=8192)  # pure; a recompile batch asks it of the same keys per flow
def names_secret(key: str) -> bool:
    """True when the key's name says it holds a secret (its value must be ``ENC(...)``)."""
    words = [w for w in re.split(r"[._\-\s]+", key.lower()) if w]
    if any(w in _SECRET_WORDS or w in _SECRET_JOINED for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def control_problems(properties: Mapping[str, object]) -> list[str]:
    """Control characters (a null byte included) in keys or values."""
    problems = []
    for key, value in properties.items():
        if not isinstance(key, str):
            continue
        if _CONTROL_IN_KEY.search(key):
            problems.append(
                f"key {key.encode('unicode_escape').decode()[:60]!r} contains a control character"
            )
        elif isinstance(value, str) and _CONTROL_IN_VALUE.search(value):
            problems.append(f"{key!r}: the value contains a control character (a null byte or similar)")
    return problems


def refused_keys(properties: Iterable[str]) -> list[str]:
    """The keys of ``properties`` that a flow owner or a template may not set."""
    return sorted(k for k in properties if isinstance(k, str) and owner_of(k) == NODE)


def refused_message(key: str, where: str = "a flow") -> str:
    return (
        f"{key!r} is set by the portal from the flow's data nodes; {where} may not set it (docs/security.md)"
    )


def class_problems(properties: Mapping[str, object]) -> list[str]:
    """Class-path properties naming a class outside the allowed packages (nothing is imported)."""
    problems = []
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value.strip():
            continue
        base = base_key(key)
        if base in CLASS_KEYS:
            paths = [value.strip()]
        elif base in CLASS_LIST_KEYS:
            paths = [p.strip() for p in value.split(",") if "." in p.strip()]
        else:
            continue
        for path in paths:
            try:
                check_class_path(path, key)
            except ClassLoadError as error:
                problems.append(str(error))
    return problems


def clear_secret_keys(
    properties: Mapping[str, object], looks_encrypted: Callable[[object], bool]
) -> list[str]:
    """Keys named like a secret whose non-empty value is not ``ENC(...)``."""
    return sorted(
        key
        for key, value in properties.items()
        if isinstance(key, str)
        and names_secret(key)
        and isinstance(value, str)
        and value.strip()
        and not looks_encrypted(value)
    )


def urn_problems(properties: Mapping[str, object]) -> list[str]:
    """``dataset.urn`` becomes a folder name under the publish dir: no separators, no ``..``."""
    problems = []
    for key, value in properties.items():
        named = isinstance(key, str) and base_key(key) == "dataset.urn" and isinstance(value, str)
        if named and value and (not _SAFE_URN.match(value) or ".." in value):
            problems.append(
                f"{key!r} must be a plain name (letters, digits, '_', '.', ':', '=', '-'; no '/' or '..')"
            )
    return problems


def clear_secret_message(key: str) -> str:
    return (
        f"{key!r} names a secret (password, secret, token, credential, private/api key) but is given "
        "in clear; give it as ENC(...) (docs/keys.md)"
    )


def user_property_problems(
    properties: Mapping[str, object],
    looks_encrypted: Callable[[object], bool],
    where: str = "a flow",
    *,
    secrets: bool = True,
) -> list[str]:
    """Everything the schema refuses in properties a user (flow owner or template author) gives.
    ``secrets=False`` leaves the clear-secret check to the caller (the flow save words it with
    the templates' declared list)."""
    problems = control_problems(properties)
    problems += [refused_message(key, where) for key in refused_keys(properties)]
    problems += class_problems(properties)
    if secrets:
        problems += [clear_secret_message(key) for key in clear_secret_keys(properties, looks_encrypted)]
    problems += urn_problems(properties)
    return problems
