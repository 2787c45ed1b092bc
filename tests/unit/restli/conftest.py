"""A Gobblin team moving to Flowport: the packs and topology their flows use,
and a way to send requests exactly as Gobblin's clients put them on the wire."""

from __future__ import annotations

import pytest

from tests.builders.flows import make_topology_nodes
from tests.builders.restli import Wire
from tests.unit.templatepacks.factories import make_pack


@pytest.fixture
def packs(owner):
    """GaaS's FS:///mytemplate.template, and a pack with a Gobblin-style template."""
    make_pack(owner, "seed", {"mytemplate.template": "a = 1"})
    make_pack(
        owner,
        "gobblin",
        {"distcp.template": 'gobblin.template.required_attributes = "from,to"\ncopy.from = ${from}\n'},
    )


@pytest.fixture(autouse=True)
def topology(db):
    """The data nodes the flows name: a save refuses a name that is no data node."""
    make_topology_nodes()


@pytest.fixture
def wire(owner):
    return Wire(owner)
