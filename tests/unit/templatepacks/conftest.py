"""People around a template pack: its owner (olivia), a reader (rita), an
outsider (oscar) and staff (stella) — the first and last two from tests/conftest."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.unit.templatepacks.factories import make_pack


@pytest.fixture
def reader(db):
    return UserFactory(username="rita")


@pytest.fixture
def pack(owner, reader):
    return make_pack(owner, readers=[reader])
