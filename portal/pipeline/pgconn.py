"""Open a psycopg connection from a ``jdbc:postgresql://`` URL.

The JDBC writer's publish step must run one destination transaction (move staging rows, write the
publish marker); Spark's JDBC writer cannot do that, so the commit step talks to PostgreSQL directly.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import psycopg
from psycopg import sql

from portal.pipeline.errors import ConfigError


def connect(url: str, user: str | None, password: str | None) -> psycopg.Connection:
    """Connect with the URL's host/port/database (and ``user``/``password`` query params if any)."""
    if not url.startswith("jdbc:postgresql:"):
        raise ConfigError(
            f"only jdbc:postgresql:// URLs are supported for publishing, got '{url.split('?')[0]}'"
        )
    parsed = urlparse(url[len("jdbc:") :])
    params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    return psycopg.connect(
        host=parsed.hostname or "localhost",
        port=parsed.port or 5432,
        dbname=(parsed.path or "/").lstrip("/") or "postgres",
        user=user or params.get("user"),
        password=password or params.get("password"),
        autocommit=False,
    )


def table_ident(name: str) -> sql.Identifier:
    """``schema.table`` or ``table`` as a safely quoted identifier."""
    return sql.Identifier(*[part.strip('"') for part in name.split(".")])
