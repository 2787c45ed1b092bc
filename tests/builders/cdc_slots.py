"""The shop database a CDC flow's replication slot reads, as the slot stories share it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.pg_logical import own_database


@pytest.fixture
def shop(logical_pg: str) -> Iterator[dict[str, Any]]:
    with own_database(
        logical_pg, "CREATE SCHEMA shop", "CREATE TABLE shop.customers (id int PRIMARY KEY, name text)"
    ) as found:
        yield found
