"""People every story needs: an owner, a teammate, an outsider and staff; and the suite's two
databases.

The suite runs on PostgreSQL (production's database) and, in a second pass of `make test`, on SQLite
with the serverless broker (what `make run` runs on). A story that needs something only PostgreSQL
has (its query plans, advisory locks, a PostgreSQL-only statement) is marked ``postgres``: the SQLite
pass deselects it by that marker (`-m "not postgres"`, counted in pytest's summary), and run on
SQLite anyway it fails, never passing or skipping silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from portal.templatepacks import resolution
from tests.builders.api import api_client_for
from tests.factories import UserFactory

# The test suite's own sources and operators (tests.integration.sources.CountingSource, …) are
# loadable by dotted path in the test environment only: a running portal allows portal.pipeline and
# what its operator lists (docs/security.md). Set before anything starts, so the workers, schedulers
# and web servers the tests spawn inherit it.
os.environ["FLOWPORT_PIPELINE_PACKAGES"] = "tests"
# Processes the tests start (web, worker, scheduler) compile flows over nodes without grants.
os.environ["DATA_NODE_DEFAULT_ACCESS"] = "open"


def on_sqlite() -> bool:
    """Does this run's portal database live in SQLite (the embedded mode)?"""
    return django_settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """On SQLite the test database is a file beside DATABASE_URL's, ``test_<name>`` as on PostgreSQL
    (Django's default is an in-memory database): the web servers, workers and schedulers the
    browser and stack tests start open it as the test process does."""
    database = django_settings.DATABASES["default"]
    if on_sqlite() and not database.get("TEST", {}).get("NAME"):
        path = Path(database["NAME"])
        path.parent.mkdir(parents=True, exist_ok=True)
        database.setdefault("TEST", {})["NAME"] = str(path.with_name(f"test_{path.name}"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") and on_sqlite():
        pytest.fail(
            "this story needs PostgreSQL (marked `postgres`): run it with DATABASE_URL=postgres://…, "
            'or deselect it with -m "not postgres" as the SQLite pass of `make test` does',
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _open_data_nodes(settings):
    """Stories about flows, not about grants: a data node without grants is open to every user
    (production's default is closed; tests/security/ runs with it closed)."""
    settings.DATA_NODE_DEFAULT_ACCESS = "open"


@pytest.fixture(autouse=True)
def _fresh_template_caches():
    """Each story starts with the process's parsed-template caches empty. They are keyed by stored
    template ids, which never name two rows in a running portal; but a story's rows are rolled back,
    and SQLite's AUTOINCREMENT counter rolls back with them, so the next story's templates take the
    same ids (PostgreSQL's sequences never go back)."""
    yield
    resolution.PARSED.clear()
    resolution.RESOLVED.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 is slow on purpose; tests log in hundreds of times."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def owner(db):
    return UserFactory(username="olivia")


@pytest.fixture
def outsider(db):
    return UserFactory(username="oscar")


@pytest.fixture
def staff(db):
    return UserFactory(username="stella", is_staff=True)


@pytest.fixture
def api(owner) -> APIClient:
    """The owner's API client."""
    return api_client_for(owner)
