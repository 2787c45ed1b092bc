"""One destination table per dataset: the ``{table}`` placeholder of ``writer.jdbc.table`` (and
``writer.iceberg.table``).

A whole schema (``source.jdbc.tables=public.*``) is many datasets; ``writer.jdbc.table=copy_{table}``
gives each its own target (``public.orders`` -> ``copy_orders``) instead of pouring them all into one
table. The writer's staging tables, the publish step, upserts and schema evolution all take the
name resolved here, so nothing downstream knows a template was used.

The name put in is the dataset's table name (its URN after the last ``.``), which came from the
source database's catalog: untrusted. It is put in only when it is a plain identifier (an ASCII
letter or ``_``, then letters, digits, ``_``; at most 63 characters, PostgreSQL's limit): nothing
to escape in any dialect, and no ``.`` that would move the table into another schema. Any other
name fails that dataset with the key and the name in the message; the dialect still quotes the
result as it quotes every identifier.
"""

from __future__ import annotations

import re

from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

KEY = "writer.jdbc.table"
PLACEHOLDER = "{table}"
KNOWN = ("table",)
MAX_NAME = 63  # PostgreSQL's identifier limit (MySQL's is 64)
# ``{...}`` not preceded by ``$`` (``${name}`` is a template substitution, resolved before the worker).
_FIELD = re.compile(r"(?<!\$)\{([^{}]*)\}")
_SUBSTITUTION = re.compile(r"\$\{[^{}]*\}")
PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")


def has_placeholder(template: str | None) -> bool:
    return bool(template) and PLACEHOLDER in (template or "")


def template_problems(template: str | None, named: str) -> list[str]:
    """What the save refuses in a table template (``named``: the key as messages name it): a
    placeholder other than ``{table}``, or a brace outside one."""
    if not template:
        return []
    problems = [
        f"{named}: unknown placeholder '{{{field}}}' (known: {', '.join('{' + k + '}' for k in KNOWN)})"
        for field in dict.fromkeys(_FIELD.findall(template))
        if field not in KNOWN
    ]
    rest = _FIELD.sub("", _SUBSTITUTION.sub("", template))
    if not problems and ("{" in rest or "}" in rest):
        problems.append(f"{named}: a '{{' or '}}' outside a placeholder such as {PLACEHOLDER}")
    return problems


def fill(template: str, name: str) -> str:
    """``template`` with every ``{table}`` replaced by ``name`` (unchecked: see :func:`resolve`)."""
    return template.replace(PLACEHOLDER, name)


def table_of(dataset_urn: str) -> str:
    """The dataset's table name: ``public.orders`` -> ``orders``; ``orders_eu`` as it is."""
    return dataset_urn.rpartition(".")[2]


def target_template(props: Properties) -> str:
    """A JDBC branch's table template: ``writer.jdbc.table``, else ``{table}`` (each dataset into a
    table named as its source table: what a newcomer expects of a flow into a database, and what
    lineage already reports for such a flow)."""
    return props.get(KEY) or PLACEHOLDER


def target(props: Properties, dataset_urn: str) -> str:
    """The JDBC branch's destination table for ``dataset_urn`` (:func:`resolve` of its template)."""
    return resolve(target_template(props), dataset_urn, props.describe(KEY))


def resolve(template: str, dataset_urn: str, named: str) -> str:
    """The destination table of ``dataset_urn``: ``template`` itself when it has no placeholder;
    a ConfigError naming ``named`` for a bad template or a table name that is not a plain identifier."""
    problems = template_problems(template, named)
    if problems:
        raise ConfigError(problems[0])
    if not has_placeholder(template):
        return template
    name = table_of(dataset_urn)
    if not PLAIN_IDENTIFIER.match(name):
        shown = name[:80].encode("unicode_escape").decode()
        raise ConfigError(
            f"{named}: {PLACEHOLDER} cannot name a table after '{shown}' (dataset '{dataset_urn[:120]}'): "
            f"only a plain name is put in (letters, digits, '_', at most {MAX_NAME} characters, not "
            "starting with a digit); leave the table out with source.jdbc.tables.exclude"
        )
    table = fill(template, name)
    if any(len(part) > MAX_NAME for part in table.split(".")):
        raise ConfigError(
            f"{named}: '{table[:200]}' (for dataset '{dataset_urn[:120]}') is longer than {MAX_NAME} "
            "characters, which PostgreSQL would cut short"
        )
    return table
