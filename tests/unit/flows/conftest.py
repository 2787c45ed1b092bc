"""Fixtures of the flow page and form stories: a signed-in owner's browser, a
small topology and the sales template pack."""

from __future__ import annotations

import pytest

from tests.builders.flows import make_sales_pack, make_topology_nodes


@pytest.fixture
def browser(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def topology_nodes(db):
    make_topology_nodes()


@pytest.fixture
def sales_pack(owner):
    return make_sales_pack(owner)
