"""Field rules of the topology. The models use them, so forms, the API, the
topology file loader and the services can never disagree."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db.models import Model

from portal.crypto.secretnames import names_secret
from portal.pipeline import nodekinds
from portal.topology import credentials

NAME_PATTERN = r"[A-Za-z0-9_.-]{1,128}"
validate_node_name = RegexValidator(rf"^{NAME_PATTERN}\Z", "Use 1-128 letters, digits, '_', '.' or '-'.")
validate_queue_name = RegexValidator(
    r"^[A-Za-z0-9_.:-]{1,200}\Z", "Use letters, digits, '_', '.', ':' or '-' (a Celery queue name)."
)

_HOST_PORT = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})"
_SPARK_MASTERS = {
    "local": re.compile(r"^local(?:\[(?:\*|[1-9][0-9]{0,3})(?:,[0-9]{1,3})?\])?\Z"),
    "standalone": re.compile(rf"^spark://{_HOST_PORT}(?:,{_HOST_PORT})*\Z"),
    "yarn": re.compile(r"^yarn\Z"),
    "k8s": re.compile(r"^k8s://https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[^\s]*)?\Z"),
}
# Which master forms fit which executor technology: a spark-local executor
# pointing at a cluster would silently run jobs somewhere nobody expects.
MASTERS_FOR_TECHNOLOGY = {
    "spark-local": ("local",),
    "spark-standalone": ("standalone",),
    "yarn": ("yarn",),
    "k8s": ("k8s",),
}

# Connection properties are stored in the clear; a value under a key that
# names a secret (crypto.secretnames) must already be ciphertext (ENC(...), the keys app's form).
_ENCRYPTED = re.compile(r"^ENC\(.+\)\Z", re.S)
MAX_KEY = 256
MAX_VALUE = 16 * 1024


def spark_master_kind(value: str) -> str | None:
    """'local', 'standalone', 'yarn' or 'k8s'; None when the URL does not parse."""
    for kind, pattern in _SPARK_MASTERS.items():
        if pattern.match(value or ""):
            if kind == "standalone" and any(
                int(part.rsplit(":", 1)[1]) > 65535 for part in value[len("spark://") :].split(",")
            ):
                return None
            return kind
    return None


def validate_spark_master(value: str) -> None:
    if spark_master_kind(value) is None:
        raise ValidationError(
            f"{value!r} is not a Spark master URL; use local, local[N], local[*], "
            "spark://host:port[,host:port], yarn or k8s://https://host:port."
        )


def validate_string_map(value: object, *, secrets_allowed: bool = False) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Must be a map of string keys to string values.")
    problems = []
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            problems.append("keys must be non-empty strings")
        elif "\x00" in key or (isinstance(item, str) and "\x00" in item):
            problems.append(f"{key[:40]!r} contains a NUL character")
        elif len(key) > MAX_KEY:
            problems.append(f"key {key[:40]!r}… is longer than {MAX_KEY} characters")
        elif not isinstance(item, str):
            problems.append(f"{key!r} must be a string, not {type(item).__name__}")
        elif len(item) > MAX_VALUE:
            problems.append(f"{key!r} is longer than {MAX_VALUE} characters")
        elif not secrets_allowed and item and names_secret(key) and not _ENCRYPTED.match(item):
            problems.append(f"{key!r} looks like a secret; store it encrypted as ENC(...), not in the clear")
    if problems:
        raise ValidationError("; ".join(problems))


def validate_connection_properties(value: object) -> None:
    """A string map whose secrets are ENC(...): under a secret-named key, and none
    written inside another value (a URL's `user:pass@` or `password=`, credentials.py),
    where it would be stored and shown in the clear. Each problem names its key."""
    validate_string_map(value)
    assert isinstance(value, dict)  # validate_string_map refused anything else
    problems = [
        f"{key}: holds a secret in clear text ({', '.join(found)}); take it out and keep it as "
        "ENC(...) in the node's password property (a JDBC flow gives its own as "
        "source.conn.password / writer.jdbc.password)"
        for key, item in sorted(value.items())
        if isinstance(item, str) and (found := credentials.secrets_in(item))
    ]
    if problems:
        raise ValidationError(problems)


# Kinds a data node may still be stored as (rows made before) but no source reads and no
# destination writes yet: never offered, and refused for a new node or a change of kind, so a
# flow cannot be built over a hop no job can run.
NOT_YET_RUNNABLE_KINDS = ("hive", "kafka")


def not_yet_runnable(kind: str) -> str:
    """Why a node of `kind` cannot be made now."""
    return (
        f"{kind}: no Flowport source reads and no destination writes this kind yet (not yet runnable); "
        "use jdbc, files, iceberg or other."
    )


# The kinds of data node a user may make (the policy narrows them, USER_NODE_KINDS), and so the
# kinds an executor's routing policy for user-made nodes may name: every kind the pipeline binds.
USER_NODE_KINDS = tuple(nodekinds.KINDS)


def user_kinds(value: str) -> list[str]:
    """`"jdbc, files"` → ["jdbc", "files"]: an executor's user-node routing field, read."""
    return [item.strip().lower() for item in (value or "").split(",") if item.strip()]


def validate_user_kinds(value: str) -> None:
    unknown = [kind for kind in user_kinds(value) if kind not in USER_NODE_KINDS]
    if unknown:
        raise ValidationError(
            f"{', '.join(unknown)}: not a kind of user-made data node; use {', '.join(USER_NODE_KINDS)} "
            "(comma-separated)."
        )


def validate_spark_conf(value: object) -> None:
    validate_string_map(value)
    assert isinstance(value, dict)  # validate_string_map refused anything else
    bad = [key for key in value if not key.startswith("spark.")]
    if bad:
        raise ValidationError(f"Spark conf keys start with 'spark.': {', '.join(sorted(bad)[:5])}")


def unique_error(model: type[Model], field: str, value: str, noun: str) -> ValidationError | None:
    """The error for a unique field already taken (an IntegrityError says only that one was)."""
    if model._default_manager.filter(**{field: value}).exists():
        return ValidationError({field: f"A {noun} with {field} {value!r} already exists."})
    return None
